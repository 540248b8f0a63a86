// Conformance of sessiontodo-acp-proxy with a real editor-side ACP client: the official
// TypeScript SDK (@agentclientprotocol/sdk 2.x) spawns the proxy as its agent, and the proxy
// spawns the Python SDK test agent (tests/peers/acp/plan_agent.py). sessiontodo is checked and
// written over gRPC with @grpc/grpc-js, as another backend would (see acp-support.mjs).
//
// Driven by tests/peers/acp/test_acp_node_conformance.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  acp,
  call,
  CWD,
  entry,
  eventually,
  same,
  sessionExists,
  storedContents,
  withEditor,
} from './acp-support.mjs';

/** Have the test agent send these plans, in order, in one prompt turn. */
const sendPlans = (editor, sessionId, plans) => editor.prompt(sessionId, JSON.stringify({ plans }));

// The conformance suite

test('plans the agent sends arrive at the editor and in sessiontodo', () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    const response = await sendPlans(editor, sessionId, [
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
      { content: 'Written over gRPC', status: 'in_progress', priority: 'low', _meta: { 'sessiontodo/todoId': 'grpc-1' } },
      {
        content: '[cancelled] Dropped',
        status: 'completed',
        priority: 'medium',
        _meta: { 'sessiontodo/todoId': 'grpc-2', 'sessiontodo/todoStatus': 'cancelled' },
      },
    ]);
  }));

test("two concurrent sessions never see each other's plans", () =>
  withEditor(async (editor) => {
    const [first, second] = await Promise.all([editor.newSession(), editor.newSession()]);
    const plansFor = (sessionId) =>
      Array.from({ length: 10 }, (_, n) => [entry(`${sessionId} step ${n}`), entry(`${sessionId} done`, 'completed')]);

    await Promise.all([sendPlans(editor, first, plansFor(first)), sendPlans(editor, second, plansFor(second))]);
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

    await sendPlans(editor, sessionId, plans);

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
    await sendPlans(editor, sessionId, [[entry('kept on close')]]);
    await eventually(async () => same(await storedContents(sessionId), ['kept on close']), 'the plan is stored');

    await editor.agent.request(acp.methods.agent.session.close, { sessionId });
    await editor.agent.request(acp.methods.agent.session.load, { sessionId, cwd: CWD, mcpServers: [] });
    // The delete is queued behind the close and the load: once it is done, both were seen.
    assert.deepEqual(await storedContents(sessionId), ['kept on close']);

    await editor.agent.request(acp.methods.agent.session.delete, { sessionId });

    await eventually(async () => !(await sessionExists(sessionId)), 'the session is removed');
    assert.equal(await storedContents(sessionId), null);
  }));
