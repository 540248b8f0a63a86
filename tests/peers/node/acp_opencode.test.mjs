// sessiontodo-acp-proxy in front of the real OpenCode (`opencode acp`, npm opencode-ai), driven by
// the stub model (tests/peers/opencode_real/stub_model.py), with the official TypeScript SDK as the
// editor. Run once per OpenCode version by tests/peers/acp/test_acp_opencode_real.py, which sets
// OPENCODE_VERSION: 1.15.x sends ACP `plan` updates, 1.16 and later send none (the list travels
// only in the `todowrite` tool call, which the proxy mirrors as a documented OpenCode mapping).
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
  storedTodos,
  withEditor,
} from './acp-support.mjs';

const VERSION = process.env.OPENCODE_VERSION;
assert.ok(VERSION, 'OPENCODE_VERSION must be set');
const SENDS_PLANS = VERSION.startsWith('1.15.');

/** What tests/peers/opencode_real/stub_model.py todo_prompt() builds: the stub model then writes exactly `todos`. */
const todoPrompt = (todos) => `Plan the work with the todo tool. TODOS: ${JSON.stringify(todos)}`;

const WANTED = [
  entry('Write the failing test', 'completed', 'high'),
  entry('Implement the feature', 'in_progress', 'high'),
  entry('Drop the legacy flag', 'cancelled', 'low'),
];
const CONTENTS = WANTED.map((todo) => todo.content);
/** How the proxy shows WANTED to an editor (ACP v1 has no `cancelled`). */
const SHOWN = ['Write the failing test', 'Implement the feature', '[cancelled] Drop the legacy flag'];
/** The plans OpenCode itself sends the editor for one todowrite: one `plan` update on 1.15, none later. */
const AGENT_PLANS = SENDS_PLANS ? 1 : 0;

/** A new session in which OpenCode has written WANTED, stored in sessiontodo. */
async function sessionWithTodos(editor) {
  const sessionId = await editor.newSession();
  const { stopReason } = await editor.prompt(sessionId, todoPrompt(WANTED));
  assert.equal(stopReason, 'end_turn');
  await eventually(async () => same(await storedContents(sessionId), CONTENTS), 'the todo list is stored');
  return sessionId;
}

const addElsewhere = (sessionId, content) => call('AddTodo', { session_id: sessionId, todo: { content } });

test(`OpenCode ${VERSION} answers initialize through the proxy with its own capabilities`, () =>
  withEditor(async (editor) => {
    const { agentInfo, agentCapabilities } = editor.initialized;
    assert.equal(agentInfo.version, VERSION);
    assert.equal(agentCapabilities.loadSession, true);
    assert.deepEqual(Object.keys(agentCapabilities.sessionCapabilities).sort(), ['close', 'fork', 'list', 'resume']);
  }));

test(`the todo list OpenCode ${VERSION} writes reaches sessiontodo with its statuses and priorities`, () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);

    await eventually(async () => {
      const todos = await storedTodos(sessionId);
      return same(
        todos.map(({ status, priority }) => [status, priority]),
        [
          ['TODO_STATUS_COMPLETED', 'TODO_PRIORITY_HIGH'],
          ['TODO_STATUS_IN_PROGRESS', 'TODO_PRIORITY_HIGH'],
          ['TODO_STATUS_CANCELLED', 'TODO_PRIORITY_LOW'],
        ],
      );
    }, 'the todowrite call (not the lossy plan of 1.15: medium, no cancelled) is what stays stored');
    assert.equal(editor.shown(sessionId).length, AGENT_PLANS);
  }));

test('an edit by another backend reaches the editor; OpenCode\'s own list never comes back', () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);

    await addElsewhere(sessionId, 'Reviewed elsewhere');

    await eventually(() => same(editor.lastShown(sessionId), [...SHOWN, 'Reviewed elsewhere']), 'the edit is shown');
    // Watch events arrive in revision order: an echo of OpenCode's list would have come first.
    assert.equal(editor.shown(sessionId).length, AGENT_PLANS + 1);
  }));

test('close keeps the plan, load stores the replayed list as the truth, resume injects nothing', () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);

    assert.deepEqual(await editor.agent.request(acp.methods.agent.session.close, { sessionId }), {});
    await call('ReplaceTodos', { session_id: sessionId, todos: [{ content: 'Changed while closed' }] });
    assert.ok(await sessionExists(sessionId));

    await editor.agent.request(acp.methods.agent.session.load, { sessionId, cwd: CWD, mcpServers: [] });
    await eventually(async () => same(await storedContents(sessionId), CONTENTS), 'the replayed list is stored');
    const afterLoad = editor.shown(sessionId).length;

    await editor.agent.request(acp.methods.agent.session.resume, { sessionId, cwd: CWD, mcpServers: [] });
    await addElsewhere(sessionId, 'After the resume');
    await eventually(() => same(editor.lastShown(sessionId), [...SHOWN, 'After the resume']), 'a later edit is shown');

    assert.equal(editor.shown(sessionId).length, afterLoad + 1, 'resume showed nothing of its own');
    assert.ok(editor.shown(sessionId).every((plan) => !plan.includes('Changed while closed')));
    assert.equal(afterLoad, AGENT_PLANS * 2, "the editor saw OpenCode's plans only (1.15 replays its plan)");
  }));

test('resume shows a change made elsewhere since OpenCode\'s last list (and only then)', () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);
    await editor.agent.request(acp.methods.agent.session.close, { sessionId });
    await addElsewhere(sessionId, 'Added while closed');
    const before = editor.shown(sessionId).length;

    await editor.agent.request(acp.methods.agent.session.resume, { sessionId, cwd: CWD, mcpServers: [] });

    await eventually(() => same(editor.lastShown(sessionId), [...SHOWN, 'Added while closed']), 'the change is shown');
    assert.equal(editor.shown(sessionId).length, before + 1);
  }));

test('fork: the forked session gets its own copy; session/list lists both', () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);

    // SDK 2.4 has no constant for session/fork (unstable in its v1 schema): the method by name.
    const { sessionId: forkId } = await editor.agent.request('session/fork', {
      sessionId,
      cwd: CWD,
      mcpServers: [],
    });
    assert.notEqual(forkId, sessionId);
    await eventually(async () => same(await storedContents(forkId), CONTENTS), 'the fork has the replayed list');

    await addElsewhere(forkId, 'Only in the fork');
    await eventually(() => same(editor.lastShown(forkId), [...SHOWN, 'Only in the fork']), 'the fork is watched');
    assert.deepEqual(await storedContents(sessionId), CONTENTS);

    const { sessions } = await editor.agent.request(acp.methods.agent.session.list, {});
    const listed = sessions.map((session) => session.sessionId);
    assert.ok(listed.includes(sessionId) && listed.includes(forkId), JSON.stringify(listed));
  }));

test('session/delete, which OpenCode does not support, removes nothing', () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);

    await assert.rejects(editor.agent.request(acp.methods.agent.session.delete, { sessionId }), (error) => {
      assert.equal(error.code, -32601);
      return true;
    });
    await addElsewhere(sessionId, 'Still mirrored');
    await eventually(() => same(editor.lastShown(sessionId), [...SHOWN, 'Still mirrored']), 'still watched');
    assert.ok(await sessionExists(sessionId));
  }));
