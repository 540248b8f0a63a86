// A real browser for the web board's tests and bench: Debian's chromium, driven by playwright-core
// (never a browser download), remote-controlled by Python over JSON lines.
//
// Each line on stdin is a request {id, op, ...}; each answer on stdout is {id, ok, value} or
// {id, ok: false, error}. Operations:
//   newPage {page, colorScheme?, viewport?}      a page in a fresh context (own cookies, own connections)
//   call {page, method, args}                    page[method](...args), a dotted method on a part of the page
//                                                (e.g. goto, screenshot, keyboard.press)
//   locator {page, selector, method, args}       page.locator(selector)[method](...args)  e.g. click, fill, waitFor
//   evaluate {page, expression, arg?}            page.evaluate(new Function('arg', expression), arg)
//   cookies {page} / addCookies {page, cookies}  the page's context cookies
//   axe {page}                                   axe-core's violations on the page as it is
//   problems {page}                              page errors, console errors and CSP reports seen so far
//   closePage {page}
// stdout carries only answers: everything else goes to stderr.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
  ],
});

const pages = new Map();

async function newPage({ page: name, colorScheme = 'light', viewport = { width: 1280, height: 800 } }) {
  const context = await browser.newContext({ colorScheme, viewport, reducedMotion: 'reduce' });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  pages.set(name, { context, page, problems });
  return name;
}

function entry(name) {
  const found = pages.get(name);
  if (!found) throw new Error(`no page ${name}`);
  return found;
}

const operations = {
  newPage,
  async call({ page, method, args = [] }) {
    const path = method.split('.');
    const owner = path.slice(0, -1).reduce((part, name) => part[name], entry(page).page);
    const result = await owner[path.at(-1)](...args);
    return method === 'goto' ? { status: result?.status() ?? null, url: entry(page).page.url() } : plain(result);
  },
  async locator({ page, selector, method, args = [] }) {
    return plain(await entry(page).page.locator(selector)[method](...args));
  },
  async evaluate({ page, expression, arg = null }) {
    // eslint-disable-next-line no-new-func
    return entry(page).page.evaluate(new Function('arg', expression), arg);
  },
  async cookies({ page }) {
    return entry(page).context.cookies();
  },
  async addCookies({ page, cookies }) {
    await entry(page).context.addCookies(cookies);
    return null;
  },
  async axe({ page }) {
    // Run by the DevTools protocol, outside the page's Content-Security-Policy, as an extension would.
    const { page: target } = entry(page);
    await target.evaluate(AXE_SOURCE);
    return target.evaluate(async () => {
      const results = await window.axe.run(document, { resultTypes: ['violations'] });
      return results.violations.map(({ id, impact, help, nodes }) => ({
        id,
        impact,
        help,
        targets: nodes.map((node) => node.target.join(' ')),
      }));
    });
  },
  async problems({ page }) {
    return entry(page).problems;
  },
  async closePage({ page }) {
    await entry(page).context.close();
    pages.delete(page);
    return null;
  },
};

/** What JSON can carry of a Playwright result (Buffers and handles are left out). */
function plain(value) {
  if (value === undefined || Buffer.isBuffer(value)) return null;
  if (value !== null && typeof value === 'object' && typeof value.asElement === 'function') return null;
  return value;
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const request = JSON.parse(line);
  let answer;
  try {
    answer = { id: request.id, ok: true, value: (await operations[request.op](request)) ?? null };
  } catch (error) {
    answer = { id: request.id, ok: false, error: String(error?.message ?? error) };
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
await browser.close();
