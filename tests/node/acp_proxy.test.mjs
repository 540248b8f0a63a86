// Conformance of sessiontodo-acp-proxy with a real editor-side ACP client: the official
// TypeScript SDK (@agentclientprotocol/sdk 2.x) spawns the proxy as its agent, and the proxy
// spawns the Python SDK test agent (tests/acp/plan_agent.py). sessiontodo is checked and
// written over gRPC with @grpc/grpc-js, as another backend would.
//
// Driven by tests/acp/test_acp_node_conformance.py, which starts the server and sets:
//   SESSIONTODO_ADDRESS  host:port of a running sessiontodo server
//   ACP_PROXY_COMMAND    JSON array: the proxy command line, agent command included
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import * as acp from '@agentclientprotocol/sdk';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const ADDRESS = required('SESSIONTODO_ADDRESS');
const PROXY_COMMAND = JSON.parse(required('ACP_PROXY_COMMAND'));
const PROTO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../protos');
const WAIT_MS = 20_000;
const CALL_DEADLINE_MS = 10_000;

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set (run through tests/acp/test_acp_node_conformance.py)`);
  return value;
}

// sessiontodo over gRPC

const definition = protoLoader.loadSync('sessiontodo/v1/todo_service.proto', {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  includeDirs: [PROTO_DIR],
});
const { TodoService } = grpc.loadPackageDefinition(definition).sessiontodo.v1;

function call(method, request) {
  const client = new TodoService(ADDRESS, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + CALL_DEADLINE_MS }, (error, response) => {
      client.close();
      return error ? reject(error) : resolve(response);
    });
  });
}

async function storedContents(sessionId) {
  try {
    const { todos } = await call('GetTodos', { session_id: sessionId });
    return todos.map((todo) => todo.content);
  } catch (error) {
    if (error.code === grpc.status.NOT_FOUND) return null;
    throw error;
  }
}

async function sessionExists(sessionId) {
  const { sessions } = await call('ListSessions', {});
  return sessions.some((session) => session.session_id === sessionId);
}

/** Poll `check` until it returns true; fail after WAIT_MS. */
async function eventually(check, what) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) assert.fail(`not within ${WAIT_MS} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const same = (left, right) => JSON.stringify(left) === JSON.stringify(right);

// An editor: the TypeScript SDK's client app on the proxy's stdio

class Editor {
  /** Start the proxy (which starts the agent) and initialize an ACP connection to it. */
  static async open() {
    const editor = new Editor();
    await editor.agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    return editor;
  }

  constructor() {
    this.child = spawn(PROXY_COMMAND[0], PROXY_COMMAND.slice(1), {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, SESSIONTODO_ACP_ADDRESS: ADDRESS, SESSIONTODO_ACP_LOG_LEVEL: 'WARNING' },
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    /** sessionId -> every plan shown, in arrival order, each as its entries. */
    this.plans = new Map();
    const stream = acp.ndJsonStream(Writable.toWeb(this.child.stdin), Readable.toWeb(this.child.stdout));
    this.connection = acp
      .client({ name: 'sessiontodo-conformance-editor' })
      .onNotification(acp.methods.client.session.update, ({ params }) => {
        if (params.update.sessionUpdate !== 'plan') return;
        if (!this.plans.has(params.sessionId)) this.plans.set(params.sessionId, []);
        this.plans.get(params.sessionId).push(params.update.entries);
      })
      .onRequest(acp.methods.client.session.requestPermission, () => ({ outcome: { outcome: 'cancelled' } }))
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
    const { sessionId } = await this.agent.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    return sessionId;
  }

  /** Have the agent send these plans, in order, in one prompt turn. */
  async sendPlans(sessionId, plans) {
    const text = JSON.stringify({ plans });
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
    assert.equal(code, 0, 'the proxy exits with the agent exit code after the editor leaves');
  }
}

async function withEditor(body) {
  const editor = await Editor.open();
  try {
    await body(editor);
  } finally {
    await editor.close();
  }
}

const entry = (content, status = 'pending', priority = 'medium') => ({ content, status, priority });

// The conformance suite

test('plans the agent sends arrive at the editor and in sessiontodo', () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    const response = await editor.sendPlans(sessionId, [
      [entry('Analyze the codebase', 'in_progress', 'high'), entry('Write tests')],
    ]);
    assert.equal(response.stopReason, 'end_turn');

    await eventually(() => editor.shown(sessionId).length === 1, 'the plan is shown');
    assert.deepEqual(editor.plans.get(sessionId)[0], [
      { content: 'Analyze the codebase', status: 'in_progress', priority: 'high' },
      { content: 'Write tests', status: 'pending', priority: 'medium' },
    ]);
    await eventually(
      async () => same(await storedContents(sessionId), ['Analyze the codebase', 'Write tests']),
      'the plan is stored',
    );
    const { todos } = await call('GetTodos', { session_id: sessionId });
    assert.deepEqual(
      todos.map(({ status, priority }) => [status, priority]),
      [
        ['TODO_STATUS_IN_PROGRESS', 'TODO_PRIORITY_HIGH'],
        ['TODO_STATUS_PENDING', 'TODO_PRIORITY_MEDIUM'],
      ],
    );
  }));

test('a gRPC write by another client reaches the editor as a plan update', () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    await eventually(() => sessionExists(sessionId), 'the session is registered');

    await call('ReplaceTodos', {
      session_id: sessionId,
      todos: [
        { id: 'grpc-1', content: 'Written over gRPC', status: 'TODO_STATUS_IN_PROGRESS', priority: 'TODO_PRIORITY_LOW' },
        { id: 'grpc-2', content: 'Dropped', status: 'TODO_STATUS_CANCELLED', priority: 'TODO_PRIORITY_MEDIUM' },
      ],
    });

    await eventually(() => editor.shown(sessionId).length === 1, 'the change is shown');
    assert.deepEqual(editor.plans.get(sessionId)[0], [
      { content: 'Written over gRPC', status: 'in_progress', priority: 'low', _meta: { todoId: 'grpc-1' } },
      {
        content: '[cancelled] Dropped',
        status: 'completed',
        priority: 'medium',
        _meta: { todoId: 'grpc-2', todoStatus: 'cancelled' },
      },
    ]);
  }));

test("two concurrent sessions never see each other's plans", () =>
  withEditor(async (editor) => {
    const [first, second] = await Promise.all([editor.newSession(), editor.newSession()]);
    const plansFor = (sessionId) =>
      Array.from({ length: 10 }, (_, n) => [entry(`${sessionId} step ${n}`), entry(`${sessionId} done`, 'completed')]);

    await Promise.all([editor.sendPlans(first, plansFor(first)), editor.sendPlans(second, plansFor(second))]);
    for (const sessionId of [first, second]) {
      const last = [`${sessionId} step 9`, `${sessionId} done`];
      await eventually(async () => same(await storedContents(sessionId), last), `${sessionId}'s last plan is stored`);
    }
    await Promise.all(
      [first, second].map((sessionId) =>
        call('AddTodo', { session_id: sessionId, todo: { content: `${sessionId} from gRPC` } }),
      ),
    );

    for (const sessionId of [first, second]) {
      await eventually(
        () => same(editor.lastShown(sessionId)?.at(-1), `${sessionId} from gRPC`),
        `the gRPC write to ${sessionId} is shown`,
      );
      const items = editor.shown(sessionId).flat();
      assert.ok(items.length > 0);
      assert.ok(
        items.every((item) => item.startsWith(`${sessionId} `)),
        `${sessionId} was shown only its own plan items`,
      );
      const stored = await storedContents(sessionId);
      assert.ok(stored.every((item) => item.startsWith(`${sessionId} `)));
      assert.deepEqual(stored, [`${sessionId} step 9`, `${sessionId} done`, `${sessionId} from gRPC`]);
    }
  }));

test('100 rapid plan updates end with the last one stored and shown', () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    const plans = Array.from({ length: 100 }, (_, n) => [entry(`revision ${n}`, 'in_progress'), entry('constant')]);

    await editor.sendPlans(sessionId, plans);

    await eventually(() => same(editor.lastShown(sessionId), ['revision 99', 'constant']), 'the last plan is shown');
    assert.equal(editor.shown(sessionId).length, 100, 'every plan the agent sent was forwarded, none echoed');
    await eventually(
      async () => same(await storedContents(sessionId), ['revision 99', 'constant']),
      'the last plan is stored',
    );
  }));

test('session/close keeps the plan in sessiontodo; session/delete removes it', () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    await editor.sendPlans(sessionId, [[entry('kept on close')]]);
    await eventually(async () => same(await storedContents(sessionId), ['kept on close']), 'the plan is stored');

    await editor.agent.request(acp.methods.agent.session.close, { sessionId });
    await editor.agent.request(acp.methods.agent.session.load, { sessionId, cwd: process.cwd(), mcpServers: [] });
    // The delete is queued behind the close and the load: once it is done, both were seen.
    assert.deepEqual(await storedContents(sessionId), ['kept on close']);

    await editor.agent.request(acp.methods.agent.session.delete, { sessionId });

    await eventually(async () => !(await sessionExists(sessionId)), 'the session is removed');
    assert.equal(await storedContents(sessionId), null);
  }));
