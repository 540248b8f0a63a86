// Shared by the Node suites of @sessiontodo/client: the built package, the environment the pytest
// driver (test_typescript_client.py) sets, and a bounded wait for the next event of a stream.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../clients/typescript/dist/index.js');
if (!existsSync(PACKAGE)) throw new Error(`${PACKAGE} is missing: run \`make typescript\` (make test does)`);

/** The package as built in the checkout (the packaging test installs the packed one instead). */
export const sessiontodo = await import(PACKAGE);

export const EVENT_TIMEOUT_MS = 10_000;

export function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set (run through tests/peers/typescript/test_typescript_client.py)`);
  return value;
}

/** A reader of an async iterator that fails a test instead of hanging when no event comes. */
export function reader(iterable) {
  const iterator = iterable[Symbol.asyncIterator]();
  return {
    async next(timeoutMs = EVENT_TIMEOUT_MS) {
      let timer;
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no event within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        const { value, done } = await Promise.race([iterator.next(), timeout]);
        return done ? undefined : value;
      } finally {
        clearTimeout(timer);
      }
    },
    /** The next event that is not a feed's PROGRESS bookmark (one may come at any time on a slow machine). */
    async nextChange(timeoutMs = EVENT_TIMEOUT_MS) {
      for (;;) {
        const event = await this.next(timeoutMs);
        if (event?.kind !== 'progress') return event;
      }
    },
    /** Ends the stream (cancels its call). */
    close: () => iterator.return(),
  };
}

/** The error a promise rejects with; fails the test if it resolves. */
export async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}
