// The OpenCode plugin's pure parts, as installed from its tarball: the options it accepts in
// opencode.json and the translation of OpenCode's todos.
//
// Driven by test_opencode_plugin.py, which sets:
//   SESSIONTODO_PLUGIN_DIR  the installed plugin's folder (node_modules/@sessiontodo/opencode-plugin)
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

const folder = process.env.SESSIONTODO_PLUGIN_DIR;
if (!folder) throw new Error('SESSIONTODO_PLUGIN_DIR must be set (run through test_opencode_plugin.py)');
const { pluginSettings } = await import(path.join(folder, 'dist', 'settings.js'));
const { todoToService } = await import(path.join(folder, 'dist', 'translate.js'));
const plugin = (await import(path.join(folder, 'dist', 'index.js'))).default;

test('the module is an OpenCode plugin module with an id and a server function', () => {
  assert.deepEqual([plugin.id, typeof plugin.server], ['sessiontodo', 'function']);
});

test('without options the plugin talks to the local server in plaintext as origin opencode', () => {
  const settings = pluginSettings();
  assert.deepEqual([settings.address, settings.origin, settings.security.tls], ['127.0.0.1:50051', 'opencode', false]);
});

test('an unknown option is refused by name', () => {
  assert.throws(() => pluginSettings({ adress: '10.0.0.1:50051' }), /unknown option "adress"/);
});

test('an option of the wrong type is refused by name', () => {
  assert.throws(() => pluginSettings({ tls: 'yes' }), /option "tls" must be a non-empty boolean/);
});

test('a token file and a CA file make a TLS connection with a token', (t) => {
  const folder = mkdtempSync(path.join(tmpdir(), 'plugin-'));
  t.after(() => rmSync(folder, { recursive: true }));
  writeFileSync(path.join(folder, 'token'), 'plugin-token\n');
  writeFileSync(path.join(folder, 'ca.pem'), 'PEM');
  const settings = pluginSettings({ caFile: path.join(folder, 'ca.pem'), tokenFile: path.join(folder, 'token') });
  assert.deepEqual([settings.security.tls, settings.security.token], [true, 'plugin-token']);
});

test("OpenCode's own words become sessiontodo's statuses and priorities", () => {
  const todo = todoToService({ content: 'Ship', status: 'in_progress', priority: 'high' });
  assert.deepEqual(todo, { content: 'Ship', status: 'in_progress', priority: 'high', metadata: {} });
});

test('other words stay in metadata beside the stand-ins', () => {
  const todo = todoToService({ content: 'Ship', status: 'blocked', priority: 'urgent' });
  assert.deepEqual(todo, {
    content: 'Ship',
    status: 'pending',
    priority: 'medium',
    metadata: { 'opencode.status': 'blocked', 'opencode.priority': 'urgent' },
  });
});
