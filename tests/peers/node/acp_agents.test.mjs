// sessiontodo-acp-proxy in front of real ACP agents other than OpenCode — Qwen Code (`--acp`) and
// claude-agent-acp (Claude Code) — driven by the stub model (tests/peers/opencode_real/stub_model.py), with
// the official TypeScript SDK as the editor. Run once per agent by tests/peers/acp/test_acp_real_agents.py,
// which sets AGENT_NAME, AGENT_TODOS (the list to ask for, in the agent's own todo tool fields) and
// AGENT_STORED (that list as sessiontodo must hold it: [content, status] pairs).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { acp, call, eventually, same, sessionExists, storedContents, storedTodos, withEditor } from './acp-support.mjs';

const AGENT = process.env.AGENT_NAME;
const TODOS = JSON.parse(process.env.AGENT_TODOS ?? 'null');
const STORED = JSON.parse(process.env.AGENT_STORED ?? 'null');
assert.ok(AGENT && TODOS && STORED, 'AGENT_NAME, AGENT_TODOS and AGENT_STORED must be set');
const CONTENTS = STORED.map(([content]) => content);

/** What tests/peers/opencode_real/stub_model.py todo_prompt() builds: the stub model then writes exactly TODOS. */
const todoPrompt = (todos) => `Plan the work with the todo tool. TODOS: ${JSON.stringify(todos)}`;

/** A new session in which the agent has written TODOS, stored in sessiontodo. */
async function sessionWithTodos(editor) {
  const sessionId = await editor.newSession();
  const { stopReason } = await editor.prompt(sessionId, todoPrompt(TODOS));
  assert.equal(stopReason, 'end_turn');
  await eventually(async () => same(await storedContents(sessionId), CONTENTS), 'the todo list is stored');
  return sessionId;
}

test(`the plan ${AGENT} sends reaches sessiontodo with its statuses`, () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);

    const statuses = (await storedTodos(sessionId)).map(({ status }) => status);
    assert.deepEqual(
      statuses,
      STORED.map(([, status]) => `TODO_STATUS_${status.toUpperCase()}`),
    );
    assert.ok(editor.shown(sessionId).length >= 1, `${AGENT} showed the editor its plan itself`);
  }));

test(`an edit by another backend reaches the editor; ${AGENT}'s own plan never comes back`, () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);
    const agentPlans = editor.shown(sessionId).length;

    await call('AddTodo', { session_id: sessionId, todo: { content: 'Reviewed elsewhere' } });

    await eventually(() => same(editor.lastShown(sessionId), [...CONTENTS, 'Reviewed elsewhere']), 'the edit is shown');
    // Watch events arrive in revision order: an echo of the agent's plan would have come first.
    assert.equal(editor.shown(sessionId).length, agentPlans + 1);
  }));

test(`session/delete, which ${AGENT} does not support, removes nothing`, () =>
  withEditor(async (editor) => {
    const sessionId = await sessionWithTodos(editor);

    await assert.rejects(editor.agent.request(acp.methods.agent.session.delete, { sessionId }), (error) => {
      assert.equal(error.code, -32601);
      return true;
    });
    assert.ok(await sessionExists(sessionId));
  }));
