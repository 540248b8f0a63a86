// ACP's v2 draft through sessiontodo-acp-proxy: the TypeScript SDK's experimental v2 entry point as
// the editor and as the agent (acp-v2-agent.mjs), so the protocol version agreed on is 2: plans are
// plan_update only, and `cancelled` travels as itself. The SDK validates every notification it
// receives before the editor sees it. Driven by tests/peers/acp/test_acp_plan_operations_editors.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as acpV2 from '@agentclientprotocol/sdk/experimental/v2/unstable';

import { call, CWD, entry, eventually, same, storedTodos, withEditor } from './acp-support.mjs';

const V2_EDITOR = {
  sdk: acpV2,
  initialize: { protocolVersion: acpV2.PROTOCOL_VERSION, info: { name: 'v2-editor', version: '1.0.0' }, capabilities: {} },
};
const items = (planId, entries) => ({ sessionUpdate: 'plan_update', plan: { type: 'items', planId, entries } });

/** A session whose agent sends `plans` (session updates) right after creating it. */
async function sessionSending(editor, plans) {
  const { sessionId } = await editor.agent.request(acpV2.methods.agent.session.new, { cwd: CWD, _meta: { plans } });
  return sessionId;
}

const lastPlan = (editor, sessionId, planId) =>
  (editor.planUpdates.get(sessionId) ?? []).filter((update) => update.plan?.planId === planId).at(-1)?.plan;

test('the protocol agreed on is 2', () =>
  withEditor(async (editor) => {
    assert.equal(editor.initialized.protocolVersion, 2);
  }, V2_EDITOR));

test("a v2 agent's cancelled entry is stored as cancelled, and the v2 editor is shown it as itself", () =>
  withEditor(async (editor) => {
    const sessionId = await sessionSending(editor, [
      items('main', [entry('Ship it', 'completed', 'high'), entry('Old idea', 'cancelled', 'low')]),
    ]);
    await eventually(async () => (await storedTodos(sessionId))?.length === 2, 'the plan is stored');
    assert.deepEqual(
      (await storedTodos(sessionId)).map(({ content, status }) => [content, status]),
      [
        ['Ship it', 'TODO_STATUS_COMPLETED'],
        ['Old idea', 'TODO_STATUS_CANCELLED'],
      ],
    );

    await call('AddTodo', { session_id: sessionId, todo: { content: 'Added elsewhere' } });

    await eventually(() => lastPlan(editor, sessionId, 'main')?.entries?.length === 3, 'the change is shown');
    assert.deepEqual(
      lastPlan(editor, sessionId, 'main').entries.map(({ content, status }) => [content, status]),
      [
        ['Ship it', 'completed'],
        ['Old idea', 'cancelled'],
        ['Added elsewhere', 'pending'],
      ],
    );
  }, V2_EDITOR));

test("another plan's change reaches the v2 editor as plan_update with its planId", () =>
  withEditor(async (editor) => {
    const sessionId = await sessionSending(editor, [items('review', [entry('Read the diff')])]);
    let child = null;
    await eventually(async () => {
      const { sessions } = await call('ListSessions', { parent_id: sessionId, labels: { 'acp.plan_id': 'review' } });
      child = sessions[0]?.session_id ?? null;
      return child !== null;
    }, 'the plan is kept');

    await call('ReplaceTodos', { session_id: child, todos: [{ content: 'Read the diff', status: 'TODO_STATUS_CANCELLED' }] });

    await eventually(() => lastPlan(editor, sessionId, 'review')?.entries?.[0]?.status === 'cancelled', 'shown');
    assert.ok(same(lastPlan(editor, sessionId, 'review').entries.map((e) => e.content), ['Read the diff']));
  }, V2_EDITOR));
