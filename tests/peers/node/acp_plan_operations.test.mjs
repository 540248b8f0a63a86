// ACP's next plan protocol through sessiontodo-acp-proxy (`plan_update` / `plan_removed`, several
// plans per session): the official TypeScript SDK's unstable v1 entry point as an editor that
// advertises `clientCapabilities.plan`, and its stable entry point as one that does not, in front
// of the Python SDK test agent (tests/peers/acp/plan_agent.py), which sends `plan` and `plan_update` forms
// on command. Driven by tests/peers/acp/test_acp_plan_operations_editors.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { acpUnstable, call, entry, eventually, same, storedContents, withEditor } from './acp-support.mjs';

const PLANS_EDITOR = { sdk: acpUnstable, clientCapabilities: { plan: {} } };

/** Have the test agent send these updates, in order, in one prompt turn. */
const send = (editor, sessionId, plans) => editor.prompt(sessionId, JSON.stringify({ plans }));
const items = (planId, entries) => ({ planUpdate: { type: 'items', planId, entries } });

/** The sessiontodo session holding a plan: the ACP session's child labelled with the plan id. */
async function planSession(sessionId, planId) {
  const { sessions } = await call('ListSessions', { parent_id: sessionId, labels: { 'acp.plan_id': planId } });
  return sessions.length === 1 ? sessions[0].session_id : null;
}

const planUpdatesOf = (editor, sessionId) => editor.planUpdates.get(sessionId) ?? [];
const lastUpdateOf = (editor, sessionId, planId) =>
  planUpdatesOf(editor, sessionId).filter((update) => (update.plan?.planId ?? update.planId) === planId).at(-1);

test('each plan the agent sends is kept: plan as main, every plan_update in its own labelled child session', () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();

    await send(editor, sessionId, [
      [entry('Main step')],
      items('backend', [entry('Write the API', 'in_progress', 'high')]),
      { planUpdate: { type: 'markdown', planId: 'notes', content: '## Notes\n- keep it small' } },
    ]);

    await eventually(async () => same(await storedContents(sessionId), ['Main step']), 'plan main is the session');
    await eventually(async () => (await planSession(sessionId, 'notes')) !== null, 'the markdown plan is kept');
    assert.deepEqual(await storedContents(await planSession(sessionId, 'backend')), ['Write the API']);
    assert.deepEqual(await storedContents(await planSession(sessionId, 'notes')), ['## Notes\n- keep it small']);
  }, PLANS_EDITOR));

test("a gRPC write to a plan's session reaches the editor as plan_update with that planId", () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    await send(editor, sessionId, [items('backend', [entry('Write the API')])]);
    await eventually(async () => (await planSession(sessionId, 'backend')) !== null, 'the plan is kept');

    await call('ReplaceTodos', {
      session_id: await planSession(sessionId, 'backend'),
      todos: [{ content: 'Write the API' }, { content: 'Review it', status: 'TODO_STATUS_CANCELLED' }],
    });

    await eventually(() => lastUpdateOf(editor, sessionId, 'backend')?.plan?.entries?.length === 2, 'it is shown');
    const { plan } = lastUpdateOf(editor, sessionId, 'backend');
    assert.equal(plan.type, 'items');
    // An unstable v1 editor has no `cancelled`: today's marker.
    assert.deepEqual(
      plan.entries.map(({ content, status }) => [content, status]),
      [
        ['Write the API', 'pending'],
        ['[cancelled] Review it', 'completed'],
      ],
    );
  }, PLANS_EDITOR));

test('a markdown plan changed elsewhere goes back to the editor as markdown', () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    await send(editor, sessionId, [{ planUpdate: { type: 'markdown', planId: 'notes', content: '# v1' } }]);
    await eventually(async () => (await planSession(sessionId, 'notes')) !== null, 'the plan is kept');
    const child = await planSession(sessionId, 'notes');
    const { todos } = await call('GetTodos', { session_id: child });

    await call('UpdateTodo', { session_id: child, todo_id: todos[0].id, content: '# v2' });

    await eventually(() => lastUpdateOf(editor, sessionId, 'notes')?.plan?.content === '# v2', 'it is shown');
    assert.equal(lastUpdateOf(editor, sessionId, 'notes').plan.type, 'markdown');
  }, PLANS_EDITOR));

test("plan_removed from the agent removes the plan's session and nothing else", () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    await send(editor, sessionId, [[entry('Main step')], items('backend', [entry('Write the API')])]);
    await eventually(async () => (await planSession(sessionId, 'backend')) !== null, 'the plan is kept');

    await send(editor, sessionId, [{ planRemoved: 'backend' }]);

    await eventually(async () => (await planSession(sessionId, 'backend')) === null, 'the plan is removed');
    assert.deepEqual(await storedContents(sessionId), ['Main step']);
  }, PLANS_EDITOR));

test("a plan's session removed by another client reaches the editor as plan_removed", () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    await send(editor, sessionId, [items('backend', [entry('Write the API')])]);
    await eventually(async () => (await planSession(sessionId, 'backend')) !== null, 'the plan is kept');

    await call('RemoveSession', { session_id: await planSession(sessionId, 'backend') });

    await eventually(() => planUpdatesOf(editor, sessionId).at(-1)?.sessionUpdate === 'plan_removed', 'it is shown');
    assert.equal(planUpdatesOf(editor, sessionId).at(-1).planId, 'backend');
  }, PLANS_EDITOR));

test('an editor without the plan capability is shown main as plan and nothing of the other plans', () =>
  withEditor(async (editor) => {
    const sessionId = await editor.newSession();
    await send(editor, sessionId, [[entry('Main step')], items('backend', [entry('Write the API')])]);
    await eventually(async () => (await planSession(sessionId, 'backend')) !== null, 'the plan is kept');
    const shownBefore = editor.shown(sessionId).length;

    await call('ReplaceTodos', { session_id: await planSession(sessionId, 'backend'), todos: [{ content: 'Hidden' }] });
    await call('ReplaceTodos', { session_id: sessionId, todos: [{ content: 'Main, changed elsewhere' }] });

    // Changes reach the editor in revision order per session; main's arrives, the other plan's never does.
    await eventually(() => same(editor.lastShown(sessionId), ['Main, changed elsewhere']), 'main is shown');
    assert.equal(editor.shown(sessionId).length, shownBefore + 1);
    assert.equal(planUpdatesOf(editor, sessionId).length, 0);
  }));
