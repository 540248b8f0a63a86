// Helpers shared by the ACP proxy suites (acp_proxy.test.mjs, acp_opencode.test.mjs): sessiontodo
// over gRPC with @grpc/grpc-js (as another backend would write it), polling, and an editor — the
// official TypeScript SDK's client (@agentclientprotocol/sdk 2.x) on the proxy's stdio.
//
// Environment (set by the pytest driver):
//   SESSIONTODO_ADDRESS  host:port of a running sessiontodo server
//   ACP_PROXY_COMMAND    JSON array: the proxy command line, agent command included
//   ACP_AGENT_ENV        optional JSON object: environment for the proxy and its agent
//   ACP_AGENT_CWD        optional: working directory (and session cwd) for the proxy and its agent
//   ACP_AGENT_EXIT_CODE  optional: the proxy's exit code once the editor leaves (default 0; 143 for an
//                        agent that ignores the end of its input and is ended by the proxy's SIGTERM)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

import * as acp from '@agentclientprotocol/sdk';
import * as acpUnstable from '@agentclientprotocol/sdk/unstable';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export { acp, acpUnstable };

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set (run through the pytest driver in tests/peers/acp/)`);
  return value;
}

export const ADDRESS = required('SESSIONTODO_ADDRESS');
const PROXY_COMMAND = JSON.parse(required('ACP_PROXY_COMMAND'));
const AGENT_ENV = JSON.parse(process.env.ACP_AGENT_ENV ?? '{}');
export const CWD = process.env.ACP_AGENT_CWD ?? process.cwd();
const PROTO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../protos');
export const WAIT_MS = Number(process.env.ACP_WAIT_MS ?? 20_000);
const EXIT_CODE = Number(process.env.ACP_AGENT_EXIT_CODE ?? 0);
const CALL_DEADLINE_MS = 10_000;

// sessiontodo over gRPC

const definition = protoLoader.loadSync('sessiontodo/v1/todo_service.proto', {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  includeDirs: [PROTO_DIR],
});
const { TodoService } = grpc.loadPackageDefinition(definition).sessiontodo.v1;

export function call(method, request) {
  const client = new TodoService(ADDRESS, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + CALL_DEADLINE_MS }, (error, response) => {
      client.close();
      return error ? reject(error) : resolve(response);
    });
  });
}

/** The stored todos of a session, or null if it does not exist. */
export async function storedTodos(sessionId) {
  try {
    return (await call('GetTodos', { session_id: sessionId })).todos;
  } catch (error) {
    if (error.code === grpc.status.NOT_FOUND) return null;
    throw error;
  }
}

export async function storedContents(sessionId) {
  const todos = await storedTodos(sessionId);
  return todos && todos.map((todo) => todo.content);
}

export async function sessionExists(sessionId) {
  const { sessions } = await call('ListSessions', {});
  return sessions.some((session) => session.session_id === sessionId);
}

/** Poll `check` until it returns true; fail after WAIT_MS. */
export async function eventually(check, what) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) assert.fail(`not within ${WAIT_MS} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export const same = (left, right) => JSON.stringify(left) === JSON.stringify(right);

export const entry = (content, status = 'pending', priority = 'medium') => ({ content, status, priority });

// An editor: the TypeScript SDK's client app on the proxy's stdio

export class Editor {
  /**
   * Start the proxy (which starts the agent) and initialize an ACP connection to it. `sdk`: the SDK
   * entry point the editor is built on (acpUnstable for the next plan protocol), `clientCapabilities`
   * what it advertises (`{ plan: {} }`: it takes plan_update and plan_removed); `initialize`: the whole
   * initialize params instead (the v2 draft's differ).
   */
  static async open({ sdk = acp, clientCapabilities = {}, initialize = null } = {}) {
    const editor = new Editor(sdk);
    editor.initialized = await editor.agent.request(
      sdk.methods.agent.initialize,
      initialize ?? { protocolVersion: sdk.PROTOCOL_VERSION, clientCapabilities },
    );
    return editor;
  }

  constructor(sdk = acp) {
    this.child = spawn(PROXY_COMMAND[0], PROXY_COMMAND.slice(1), {
      stdio: ['pipe', 'pipe', 'inherit'],
      cwd: CWD,
      env: {
        ...process.env,
        ...AGENT_ENV,
        SESSIONTODO_ACP_ADDRESS: ADDRESS,
        SESSIONTODO_ACP_LOG_LEVEL: process.env.SESSIONTODO_ACP_LOG_LEVEL ?? 'WARNING',
      },
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    /** sessionId -> every plan shown, in arrival order, each as its entries. */
    this.plans = new Map();
    /** sessionId -> every plan_update and plan_removed, in arrival order, as received. */
    this.planUpdates = new Map();
    const stream = sdk.ndJsonStream(Writable.toWeb(this.child.stdin), Readable.toWeb(this.child.stdout));
    this.connection = sdk
      .client({ name: 'sessiontodo-conformance-editor' })
      .onNotification(sdk.methods.client.session.update, ({ params }) => {
        const { sessionUpdate } = params.update;
        const kept = sessionUpdate === 'plan' ? this.plans : sessionUpdate.startsWith('plan_') ? this.planUpdates : null;
        if (!kept) return;
        if (!kept.has(params.sessionId)) kept.set(params.sessionId, []);
        kept.get(params.sessionId).push(sessionUpdate === 'plan' ? params.update.entries : params.update);
      })
      .onRequest(sdk.methods.client.session.requestPermission, () => ({ outcome: { outcome: 'cancelled' } }))
      .connect(stream);
    this.agent = this.connection.agent;
  }

  shown(sessionId) {
    return (this.plans.get(sessionId) ?? []).map((entries) => entries.map((entry) => entry.content));
  }

  lastShown(sessionId) {
    const shown = this.shown(sessionId);
    return shown.length ? shown[shown.length - 1] : null;
  }

  async newSession() {
    const { sessionId } = await this.agent.request(acp.methods.agent.session.new, { cwd: CWD, mcpServers: [] });
    return sessionId;
  }

  prompt(sessionId, text) {
    return this.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] });
  }

  /** Close the connection and the proxy's input; the proxy must then exit 0 on its own. */
  async close() {
    this.connection.close();
    this.child.stdin.end();
    let timer;
    const timeout = new Promise((resolve) => (timer = setTimeout(() => resolve('timeout'), WAIT_MS)));
    const code = await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    if (code === 'timeout') this.child.kill('SIGKILL');
    assert.equal(code, EXIT_CODE, 'the proxy exits with the agent exit code after the editor leaves');
  }
}

export async function withEditor(body, options = {}) {
  const editor = await Editor.open(options);
  try {
    await body(editor);
  } finally {
    await editor.close();
  }
}
