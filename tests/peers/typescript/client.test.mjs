// @sessiontodo/client against a real sessiontodo server: every rpc, the typed errors with their
// google.rpc details, the watch and the feed, atomic batches; plus the pieces that need no server (retry policy,
// security rules, the feed's resume state).
//
// Driven by test_typescript_client.py, which starts the server and sets:
//   SESSIONTODO_ADDRESS   host:port of a running server (memory store, PROGRESS every 0.2 s)
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';

import { reader, rejection, required, sessiontodo } from './support.mjs';

const {
  Aborted,
  ChannelSecurity,
  ClaimRefused,
  Code,
  FailedPrecondition,
  FeedPosition,
  InvalidArgument,
  isLoopback,
  isTransient,
  MAX_BATCH_WRITES,
  NotFound,
  RetryPolicy,
  ServiceError,
  TodoClient,
  Unavailable,
} = sessiontodo;

const client = TodoClient.connect(required('SESSIONTODO_ADDRESS'));
after(() => client.close());

/** A new session of this test's own. */
async function newSession(options = {}) {
  const { session } = await client.createSession({ sessionId: `ts-${randomUUID()}`, ...options });
  return session.sessionId;
}

describe('sessions', () => {
  test('a session created without an id gets a generated one, once', async () => {
    const { session, created } = await client.createSession();
    assert.match(session.sessionId, /^ses_[0-9a-f]{32}$/);
    assert.equal(created, true);
  });

  test('creating an existing session returns it unchanged and says so', async () => {
    const sessionId = await newSession({ labels: { title: 'first' } });
    const { session, created } = await client.createSession({ sessionId, labels: { title: 'second' } });
    assert.equal(created, false);
    assert.deepEqual(session.labels, { title: 'first' });
  });

  test('labels and the idle TTL round-trip in milliseconds', async () => {
    const sessionId = await newSession({ labels: { title: 'Plan', project: 'p' }, idleTtlMs: 90_000 });
    const session = await client.getSession(sessionId);
    assert.deepEqual(session.labels, { title: 'Plan', project: 'p' });
    assert.equal(session.idleTtlMs, 90_000);
    assert.ok(session.createdAt instanceof Date);
  });

  test('updating a session sets and removes labels and counts as a revision', async () => {
    const sessionId = await newSession({ labels: { title: 'Plan', stale: 'x' } });
    const { session, changed } = await client.updateSession(sessionId, { labels: { title: 'Done' }, removeLabels: ['stale'] });
    assert.equal(changed, true);
    assert.deepEqual(session.labels, { title: 'Done' });
    assert.equal(session.revision, 1n);
  });

  test('sessions are listed by parent and by label', async () => {
    const parentId = await newSession();
    const label = randomUUID();
    const children = [await newSession({ parentId, labels: { batch: label } }), await newSession({ parentId })];
    const byParent = await client.listSessions({ parentId });
    const byLabel = await client.listSessions({ labels: { batch: label } });
    assert.deepEqual(byParent.map((s) => s.sessionId).sort(), [...children].sort());
    assert.deepEqual(byLabel.map((s) => s.sessionId), [children[0]]);
  });

  test('removing a session removes its descendants and names them', async () => {
    const parentId = await newSession();
    const childId = await newSession({ parentId });
    const removed = await client.removeSession(parentId);
    assert.deepEqual(removed.sort(), [parentId, childId].sort());
    assert.ok((await rejection(client.getSession(childId))) instanceof NotFound);
  });

  test('a batch read returns the lists found in order and the ids that name none', async () => {
    const [a, b] = [await newSession(), await newSession()];
    await client.replaceTodos(b, [{ content: 'b1' }]);
    const { sessions, missingSessionIds } = await client.batchGetTodos([b, 'ts-nobody', a]);
    assert.deepEqual(sessions.map(({ session, todos }) => [session.sessionId, todos.map((t) => t.content)]), [[b, ['b1']], [a, []]]);
    assert.deepEqual(missingSessionIds, ['ts-nobody']);
  });
});

describe('todos', () => {
  test('a replaced list comes back with ids, names for status and priority, and a bigint revision', async () => {
    const sessionId = await newSession();
    await client.replaceTodos(sessionId, [
      { content: 'Write the test', status: 'completed', priority: 'high', metadata: { 'acp._meta': '{}' } },
      { content: 'Ship it' },
    ]);
    const { todos, revision } = await client.getTodos(sessionId);
    assert.equal(revision, 1n);
    assert.deepEqual(
      todos.map(({ content, status, priority, metadata }) => ({ content, status, priority, metadata })),
      [
        { content: 'Write the test', status: 'completed', priority: 'high', metadata: { 'acp._meta': '{}' } },
        { content: 'Ship it', status: 'pending', priority: 'medium', metadata: {} },
      ],
    );
    assert.ok(todos.every((todo) => todo.id !== ''));
  });

  test('a todo is inserted at its index', async () => {
    const sessionId = await newSession();
    await client.replaceTodos(sessionId, [{ content: 'a' }, { content: 'c' }]);
    const added = await client.addTodo(sessionId, { content: 'b' }, { index: 1 });
    assert.equal(added.index, 1);
    assert.deepEqual((await client.getTodos(sessionId)).todos.map((t) => t.content), ['a', 'b', 'c']);
  });

  test('an add repeated with its request id returns the first result and adds nothing', async () => {
    const sessionId = await newSession();
    const requestId = randomUUID();
    const first = await client.addTodo(sessionId, { content: 'once' }, { requestId });
    const again = await client.addTodo(sessionId, { content: 'once' }, { requestId });
    assert.deepEqual(again, first);
    assert.equal((await client.getTodos(sessionId)).todos.length, 1);
  });

  test('a request id reused for another todo is refused as REQUEST_ID_REUSED', async () => {
    const sessionId = await newSession();
    const requestId = randomUUID();
    await client.addTodo(sessionId, { content: 'first' }, { requestId });
    const error = await rejection(client.addTodo(sessionId, { content: 'second' }, { requestId }));
    assert.ok(error instanceof FailedPrecondition);
    assert.equal(error.reason, 'REQUEST_ID_REUSED');
  });

  test('an update changes the given fields and an update to nothing changes no revision', async () => {
    const sessionId = await newSession();
    const { todos } = await client.replaceTodos(sessionId, [{ content: 'Draft' }]);
    const updated = await client.updateTodo(sessionId, todos[0].id, { status: 'in_progress', content: 'Write' });
    const unchanged = await client.updateTodo(sessionId, todos[0].id, { status: 'in_progress' });
    assert.deepEqual([updated.todo.content, updated.todo.status, updated.changed], ['Write', 'in_progress', true]);
    assert.deepEqual([unchanged.changed, unchanged.revision], [false, updated.revision]);
  });

  test('a removed todo is gone and a second removal is NOT_FOUND with TODO_NOT_FOUND', async () => {
    const sessionId = await newSession();
    const { todos } = await client.replaceTodos(sessionId, [{ content: 'Drop me' }]);
    assert.equal(await client.removeTodo(sessionId, todos[0].id), 2n);
    const error = await rejection(client.removeTodo(sessionId, todos[0].id));
    assert.ok(error instanceof NotFound);
    assert.equal(error.reason, 'TODO_NOT_FOUND');
  });

  test('a status this client has no name for is refused before any call', async () => {
    await assert.rejects(client.replaceTodos('ts-nobody', [{ content: 'x', status: 'done' }]), TypeError);
  });
});

describe('task graphs', () => {
  /** A session whose list is a graph: parser ← tests ← docs (each waits for the one before). */
  async function graph() {
    const sessionId = await newSession();
    const { todos } = await client.replaceTodos(sessionId, [
      { id: 'parser', content: 'Write the parser', description: 'LL(1)', activeForm: 'Writing the parser' },
      { id: 'tests', content: 'Write the tests', blockedBy: ['parser'] },
      { id: 'docs', content: 'Write the docs', blockedBy: ['tests'] },
    ]);
    return { sessionId, todos };
  }

  test('a todo carries its description, active form, owner and blockers, and what it blocks', async () => {
    const { todos } = await graph();
    const [parser, tests] = todos;
    assert.deepEqual(
      [parser.description, parser.activeForm, parser.owner, parser.blocks],
      ['LL(1)', 'Writing the parser', '', ['tests']],
    );
    assert.deepEqual(tests.blockedBy, ['parser']);
  });

  test('a ready read lists only the todos free to take, an owner read only that owner\'s', async () => {
    const { sessionId } = await graph();
    assert.deepEqual((await client.getTodos(sessionId, { ready: true })).todos.map((t) => t.id), ['parser']);
    await client.claimTodo(sessionId, { owner: 'w1' });
    assert.deepEqual((await client.getTodos(sessionId, { owner: 'w1' })).todos.map((t) => t.id), ['parser']);
    assert.deepEqual((await client.getTodos(sessionId, { ready: true })).todos, []);
  });

  test('a claim without a todo takes the first ready one; with none ready the answer has no todo', async () => {
    const { sessionId } = await graph();
    const claim = await client.claimTodo(sessionId, { owner: 'w1', leaseMs: 60_000 });
    assert.deepEqual([claim.todo.id, claim.todo.owner, claim.todo.status, claim.changed], ['parser', 'w1', 'in_progress', true]);
    assert.equal(claim.todo.leaseDurationMs, 60_000);
    assert.ok(claim.todo.leaseExpiresAt instanceof Date);
    const nothing = await client.claimTodo(sessionId, { owner: 'w2' });
    assert.deepEqual([nothing.todo, nothing.changed], [undefined, false]);
  });

  test('a taken todo is refused as TODO_TAKEN naming its owner', async () => {
    const { sessionId } = await graph();
    await client.claimTodo(sessionId, { owner: 'w1', todoId: 'parser' });
    const error = await rejection(client.claimTodo(sessionId, { owner: 'w2', todoId: 'parser' }));
    assert.ok(error instanceof ClaimRefused);
    assert.ok(error instanceof FailedPrecondition);
    assert.deepEqual([error.reason, error.owner], ['TODO_TAKEN', 'w1']);
  });

  test('a blocked todo is refused as TODO_BLOCKED naming its unfinished blockers', async () => {
    const { sessionId } = await graph();
    const error = await rejection(client.claimTodo(sessionId, { owner: 'w1', todoId: 'tests' }));
    assert.ok(error instanceof ClaimRefused);
    assert.deepEqual([error.reason, error.blockedBy], ['TODO_BLOCKED', ['parser']]);
  });

  test('a claim repeated with its request id returns the first claim and claims nothing more', async () => {
    const { sessionId } = await graph();
    await client.updateTodo(sessionId, 'tests', { removeBlockedBy: ['parser'] });
    const requestId = randomUUID();
    const first = await client.claimTodo(sessionId, { owner: 'w1', requestId });
    const again = await client.claimTodo(sessionId, { owner: 'w1', requestId });
    assert.equal(again.todo.id, first.todo.id);
    assert.deepEqual((await client.getTodos(sessionId, { owner: 'w1' })).todos.map((t) => t.id), [first.todo.id]);
  });

  test('a released todo is pending and unowned again; a release by another owner is CLAIM_NOT_HELD', async () => {
    const { sessionId } = await graph();
    await client.claimTodo(sessionId, { owner: 'w1' });
    const error = await rejection(client.releaseTodo(sessionId, 'parser', { owner: 'w2' }));
    assert.ok(error instanceof ClaimRefused);
    assert.deepEqual([error.reason, error.owner], ['CLAIM_NOT_HELD', 'w1']);
    const released = await client.releaseTodo(sessionId, 'parser', { owner: 'w1' });
    assert.deepEqual([released.todo.status, released.todo.owner], ['pending', '']);
  });

  test('a renewal moves the lease on', async () => {
    const { sessionId } = await graph();
    const claim = await client.claimTodo(sessionId, { owner: 'w1', leaseMs: 5_000 });
    const renewed = await client.renewClaim(sessionId, 'parser', { owner: 'w1', leaseMs: 60_000 });
    assert.equal(renewed.todo.leaseDurationMs, 60_000);
    assert.ok(renewed.todo.leaseExpiresAt > claim.todo.leaseExpiresAt);
  });

  test('blockers are linked and unlinked by updates; a cycle is INVALID_ARGUMENT naming the field', async () => {
    const { sessionId } = await graph();
    const linked = await client.updateTodo(sessionId, 'docs', { addBlockedBy: ['parser'] });
    assert.deepEqual(linked.todo.blockedBy, ['tests', 'parser']);
    const unlinked = await client.updateTodo(sessionId, 'docs', { removeBlockedBy: ['tests'] });
    assert.deepEqual(unlinked.todo.blockedBy, ['parser']);
    const error = await rejection(client.updateTodo(sessionId, 'parser', { addBlockedBy: ['docs'] }));
    assert.ok(error instanceof InvalidArgument);
    assert.equal(error.violations[0].field, 'add_blocked_by[0]');
  });

  test('a batch carries claims, renewals and releases, typed by their kind', async () => {
    const { sessionId } = await graph();
    const [claimed, renewed, released, reclaimed] = await client.batchWrite([
      { kind: 'claim_todo', sessionId, owner: 'w1', leaseMs: 30_000 },
      { kind: 'renew_claim', sessionId, todoId: 'parser', owner: 'w1' },
      { kind: 'release_todo', sessionId, todoId: 'parser', owner: 'w1' },
      { kind: 'claim_todo', sessionId, owner: 'w2', todoId: 'parser' },
    ]);
    assert.deepEqual(
      [claimed.kind, claimed.todo.id, renewed.todo.owner, released.todo.owner, reclaimed.todo.owner],
      ['claim_todo', 'parser', 'w1', '', 'w2'],
    );
  });
});

describe('errors', () => {
  test('an unknown session is NOT_FOUND with SESSION_NOT_FOUND and its id', async () => {
    const error = await rejection(client.getTodos('ts-nobody'));
    assert.ok(error instanceof NotFound);
    assert.equal(error.code, Code.NotFound);
    assert.equal(error.reason, 'SESSION_NOT_FOUND');
    assert.deepEqual(error.metadata, { sessionId: 'ts-nobody' });
    assert.match(error.message, /^NOT_FOUND: /);
  });

  test('bad input is INVALID_ARGUMENT listing every field violation', async () => {
    const sessionId = await newSession();
    const error = await rejection(client.replaceTodos(sessionId, [{ content: '' }, { content: 'ok' }, { content: '' }]));
    assert.ok(error instanceof InvalidArgument);
    assert.deepEqual(
      error.violations.map((v) => v.field),
      ['todos[0].content', 'todos[2].content'],
    );
  });

  test('a stale expected revision is ABORTED with both revisions and changes nothing', async () => {
    const sessionId = await newSession();
    await client.replaceTodos(sessionId, [{ content: 'v1' }]);
    const error = await rejection(client.replaceTodos(sessionId, [{ content: 'v2' }], { expectedRevision: 0n }));
    assert.ok(error instanceof Aborted);
    assert.equal(error.reason, 'REVISION_MISMATCH');
    assert.deepEqual([error.metadata.expectedRevision, error.metadata.actualRevision], ['0', '1']);
    assert.deepEqual((await client.getTodos(sessionId)).todos.map((t) => t.content), ['v1']);
  });

  test('a session under another parent is FAILED_PRECONDITION naming the existing parent', async () => {
    const [parentId, otherId] = [await newSession(), await newSession()];
    const sessionId = await newSession({ parentId });
    const error = await rejection(client.createSession({ sessionId, parentId: otherId }));
    assert.ok(error instanceof FailedPrecondition);
    assert.equal(error.metadata.parentId, parentId);
  });
});

describe('batches', () => {
  /** `count` writes adding one todo each to `sessionId`. */
  const adds = (sessionId, count) =>
    Array.from({ length: count }, (_, n) => ({ kind: 'add_todo', sessionId, todo: { content: `step ${n}` } }));

  test('a batch of every kind of write returns one result per write, typed by its kind', async () => {
    const [typed, gone] = [`ts-${randomUUID()}`, `ts-${randomUUID()}`];
    const results = await client.batchWrite(
      [
        { kind: 'create_session', sessionId: typed, labels: { title: 'Typed' } },
        { kind: 'replace_todos', sessionId: typed, todos: [{ id: 'a', content: 'A' }] },
        { kind: 'add_todo', sessionId: typed, todo: { content: 'B' }, expectedRevision: 1n },
        { kind: 'update_todo', sessionId: typed, todoId: 'a', status: 'completed' },
        { kind: 'update_session', sessionId: typed, labels: { done: 'yes' } },
        { kind: 'create_session', sessionId: gone },
        { kind: 'remove_todo', sessionId: typed, todoId: 'a' },
        { kind: 'remove_session', sessionId: gone },
      ],
      { origin: 'ts-batch' },
    );
    assert.deepEqual(results.map((result) => result.revision), [0n, 1n, 2n, 3n, 4n, 0n, 5n, 1n]);
    assert.deepEqual(results.map((result) => result.kind), [
      'create_session', 'replace_todos', 'add_todo', 'update_todo', 'update_session', 'create_session', 'remove_todo', 'remove_session',
    ]);
    assert.deepEqual(results[1].todoIds, ['a']);
    assert.deepEqual([results[2].todo.content, results[2].index, results[2].changed], ['B', 1, true]);
    assert.equal(results[3].todo.status, 'completed');
    assert.deepEqual(results[7].removedSessionIds, [gone]);
    assert.deepEqual((await client.getTodos(typed)).todos.map((t) => t.content), ['B']);
    assert.deepEqual((await client.getSession(typed)).labels, { title: 'Typed', done: 'yes' });
  });

  test('a batch across two sessions lands atomically: consecutive revisions and feed cursors, in write order', async () => {
    const label = randomUUID();
    const [a, b] = [`ts-${randomUUID()}`, `ts-${randomUUID()}`];
    const labels = { batch: label };
    const feed = reader(client.watchChanges({ includeSnapshot: true, includeProgress: true, labels }));
    await feed.next(); // the (empty) snapshot's bookmark: the feed is live
    const results = await client.batchWrite(
      [
        { kind: 'create_session', sessionId: a, labels },
        { kind: 'create_session', sessionId: b, labels },
        { kind: 'replace_todos', sessionId: a, todos: [{ id: 'one', content: 'One' }] },
        { kind: 'add_todo', sessionId: b, todo: { content: 'Elsewhere' } },
        { kind: 'update_todo', sessionId: a, todoId: 'one', status: 'in_progress', expectedRevision: 1n },
        { kind: 'add_todo', sessionId: a, todo: { content: 'Two' }, index: 0, expectedRevision: 2n },
      ],
      { origin: 'ts-batch' },
    );
    const messages = [];
    for (let n = 0; n < results.length; n += 1) messages.push(await feed.nextChange());
    await feed.close();

    assert.deepEqual(
      results.map((result) => [result.kind, result.revision, result.changed]),
      [
        ['create_session', 0n, true],
        ['create_session', 0n, true],
        ['replace_todos', 1n, true],
        ['add_todo', 1n, true],
        ['update_todo', 2n, true],
        ['add_todo', 3n, true],
      ],
    );
    assert.deepEqual(
      messages.map((message) => [message.kind, message.sessionId, message.revision]),
      [
        ['session_created', a, 0n],
        ['session_created', b, 0n],
        ['todos_replaced', a, 1n],
        ['todo_added', b, 1n],
        ['todo_updated', a, 2n],
        ['todo_added', a, 3n],
      ],
    );
    const [epoch, first] = messages[0].cursor.split('.');
    assert.deepEqual(messages.map((message) => message.cursor), messages.map((_, n) => `${epoch}.${BigInt(first) + BigInt(n)}`));
    assert.deepEqual(new Set(messages.map((message) => message.origin)), new Set(['ts-batch']));
    assert.deepEqual(messages[5].todos.map((todo) => [todo.content, todo.status]), [['Two', 'pending'], ['One', 'in_progress']]);
  });

  test('a write with bad content fails the batch, names the write and changes nothing', async () => {
    const sessionId = `ts-${randomUUID()}`;
    const error = await rejection(
      client.batchWrite([
        { kind: 'create_session', sessionId },
        { kind: 'add_todo', sessionId, todo: { content: 'fine' } },
        { kind: 'add_todo', sessionId, todo: { content: '   ' } },
      ]),
    );
    assert.ok(error instanceof InvalidArgument, String(error));
    assert.equal(error.writeIndex, 2);
    assert.deepEqual(error.violations.map((violation) => violation.field), ['writes[2].add_todo.todo.content']);
    assert.match(error.message, /^INVALID_ARGUMENT: writes\[2\]/);
    assert.ok((await rejection(client.getSession(sessionId))) instanceof NotFound);
  });

  test('a write whose expected revision is stale fails the batch as ABORTED, names the write and changes nothing', async () => {
    const [sessionId, other] = [await newSession(), await newSession()];
    await client.addTodo(sessionId, { content: 'first' });
    const error = await rejection(
      client.batchWrite([
        { kind: 'add_todo', sessionId: other, todo: { content: 'not kept' } },
        { kind: 'add_todo', sessionId, todo: { content: 'second' }, expectedRevision: 1n },
        { kind: 'add_todo', sessionId, todo: { content: 'third' }, expectedRevision: 1n },
      ]),
    );
    assert.ok(error instanceof Aborted, String(error));
    assert.deepEqual([error.writeIndex, error.reason, error.metadata.actualRevision], [2, 'REVISION_MISMATCH', '2']);
    assert.deepEqual((await client.batchGetTodos([sessionId, other])).sessions.map(({ todos }) => todos.length), [1, 0]);
  });

  test('a batch repeated with its request id returns the first results and writes once', async () => {
    const sessionId = await newSession();
    const requestId = randomUUID();
    const writes = [{ kind: 'add_todo', sessionId, todo: { content: 'once' } }];
    const first = await client.batchWrite(writes, { requestId });
    const again = await client.batchWrite(writes, { requestId });
    assert.deepEqual(again, first);
    assert.deepEqual((await client.getTodos(sessionId)).todos.map((t) => t.content), ['once']);
  });

  test('a request id reused for another batch is FAILED_PRECONDITION with REQUEST_ID_REUSED', async () => {
    const sessionId = await newSession();
    const requestId = randomUUID();
    await client.batchWrite([{ kind: 'add_todo', sessionId, todo: { content: 'first' } }], { requestId });
    const error = await rejection(client.batchWrite([{ kind: 'add_todo', sessionId, todo: { content: 'other' } }], { requestId }));
    assert.ok(error instanceof FailedPrecondition, String(error));
    assert.equal(error.reason, 'REQUEST_ID_REUSED');
  });

  test('an empty batch is INVALID_ARGUMENT, no write of its own', async () => {
    const error = await rejection(client.batchWrite([]));
    assert.ok(error instanceof InvalidArgument, String(error));
    assert.equal(error.writeIndex, undefined);
  });

  test('a batch of MAX_BATCH_WRITES writes is applied whole', async () => {
    const sessionId = await newSession();
    const results = await client.batchWrite(adds(sessionId, MAX_BATCH_WRITES));
    assert.deepEqual([results.length, results.at(-1).revision], [MAX_BATCH_WRITES, BigInt(MAX_BATCH_WRITES)]);
  });

  test('a batch of more than MAX_BATCH_WRITES writes is INVALID_ARGUMENT naming the writes and changes nothing', async () => {
    const sessionId = await newSession();
    const error = await rejection(client.batchWrite(adds(sessionId, MAX_BATCH_WRITES + 1)));
    assert.ok(error instanceof InvalidArgument, String(error));
    assert.deepEqual(error.violations.map((violation) => violation.field), ['writes']);
    assert.equal((await client.getTodos(sessionId)).revision, 0n);
  });

  test('a write of a kind this client does not know is refused before any call', async () => {
    await assert.rejects(client.batchWrite([{ kind: 'add', sessionId: 'ts-nobody' }]), { name: 'TypeError', message: /unknown write kind "add"/ });
  });
});

describe('watch', () => {
  test('a watch starts with a snapshot, then delivers every change with the full list, in order', async () => {
    const sessionId = await newSession();
    await client.replaceTodos(sessionId, [{ content: 'a' }]);
    const events = reader(client.watch(sessionId));
    const snapshot = await events.next();
    await client.addTodo(sessionId, { content: 'b' });
    const added = await events.next();
    await events.close();
    assert.deepEqual([snapshot.kind, snapshot.revision, snapshot.todos.map((t) => t.content)], ['snapshot', 1n, ['a']]);
    assert.deepEqual([added.kind, added.revision, added.todos.map((t) => t.content)], ['todo_added', 2n, ['a', 'b']]);
    assert.equal(added.todoId, added.todos[1].id);
  });

  test('a watch resumed after a revision delivers only the changes after it', async () => {
    const sessionId = await newSession();
    await client.replaceTodos(sessionId, [{ content: 'one' }]);
    await client.replaceTodos(sessionId, [{ content: 'two' }]);
    const events = reader(client.watch(sessionId, { afterRevision: 1n }));
    const next = await events.next();
    await events.close();
    assert.deepEqual([next.kind, next.revision, next.todos[0].content], ['todos_replaced', 2n, 'two']);
  });

  test('a watch ends after the removal of its session', async () => {
    const sessionId = await newSession();
    const events = reader(client.watch(sessionId));
    await events.next();
    await client.removeSession(sessionId, { origin: 'ts-test' });
    const removed = await events.next();
    assert.deepEqual([removed.kind, removed.removalReason, removed.origin], ['session_removed', 'removed', 'ts-test']);
    assert.equal(await events.next(), undefined);
  });

  test('a watch of an unknown session throws NOT_FOUND', async () => {
    const error = await rejection(reader(client.watch('ts-nobody')).next());
    assert.ok(error instanceof NotFound);
  });

  test('a quiet watch delivers PROGRESS only when asked', async () => {
    const sessionId = await newSession();
    const quiet = reader(client.watch(sessionId, { includeProgress: true }));
    await quiet.next();
    const progress = await quiet.next();
    await quiet.close();
    assert.deepEqual([progress.kind, progress.revision], ['progress', 0n]);
  });
});

describe('feed', () => {
  test('the feed starts with a snapshot and a bookmark, then carries every change with a cursor', async () => {
    const label = randomUUID();
    const sessionId = await newSession({ labels: { feed: label } });
    const events = reader(client.watchChanges({ includeSnapshot: true, includeProgress: true, labels: { feed: label } }));
    const snapshot = await events.next();
    const bookmark = await events.next();
    await client.replaceTodos(sessionId, [{ content: 'fed' }], { origin: 'ts-test' });
    const replaced = await events.nextChange();
    await events.close();
    assert.deepEqual([snapshot.kind, snapshot.sessionId, snapshot.cursor], ['snapshot', sessionId, '']);
    assert.equal(bookmark.kind, 'progress');
    assert.notEqual(bookmark.cursor, '');
    assert.deepEqual([replaced.kind, replaced.origin, replaced.todos[0].content], ['todos_replaced', 'ts-test', 'fed']);
  });

  test('a feed resumed after a cursor delivers exactly the messages after it', async () => {
    const label = randomUUID();
    const sessionId = await newSession({ labels: { feed: label } });
    const first = reader(client.watchChanges({ includeSnapshot: true, includeProgress: true, labels: { feed: label } }));
    await first.next(); // the snapshot
    await first.next(); // its bookmark: the feed is live
    await client.replaceTodos(sessionId, [{ content: 'one' }]);
    const one = await first.nextChange();
    await first.close();
    await client.replaceTodos(sessionId, [{ content: 'two' }]);
    const resumed = reader(client.watchChanges({ afterCursor: one.cursor, labels: { feed: label } }));
    const two = await resumed.next();
    await resumed.close();
    assert.deepEqual([two.revision, two.todos[0].content], [one.revision + 1n, 'two']);
  });

  test('a feed skips PROGRESS unless asked', async () => {
    const label = randomUUID();
    const sessionId = await newSession({ labels: { feed: label } });
    const events = reader(client.watchChanges({ includeSnapshot: true, labels: { feed: label } }));
    const snapshot = await events.next();
    await client.replaceTodos(sessionId, [{ content: 'after a quiet while' }]);
    const change = await events.next();
    await events.close();
    assert.deepEqual([snapshot.kind, change.kind], ['snapshot', 'todos_replaced']);
  });
});

describe('retry policy', () => {
  const unavailable = () => new Unavailable(Code.Unavailable, 'down');

  test('only UNAVAILABLE is transient', () => {
    const codes = [Code.Unavailable, Code.Unknown, Code.Internal, Code.DeadlineExceeded, Code.Aborted, Code.ResourceExhausted];
    assert.deepEqual(codes.map((code) => isTransient(new ServiceError(code, 'x'))), [true, false, false, false, false, false]);
  });

  test('delays are full jitter under a doubling cap', () => {
    const policy = new RetryPolicy({ initialMs: 100, maximumMs: 1000 });
    assert.deepEqual([0, 1, 2, 3, 4, 5].map((n) => policy.cap(n)), [100, 200, 400, 800, 1000, 1000]);
    const delays = Array.from({ length: 200 }, () => policy.delay(3));
    assert.ok(delays.every((delay) => delay >= 0 && delay <= 800));
    assert.ok(new Set(delays).size > 100, 'delays are spread, not one fixed value');
  });

  test('a policy that makes no sense is refused', () => {
    for (const options of [{ attempts: 0 }, { initialMs: 0 }, { initialMs: 2000, maximumMs: 1000 }, { deadlineMs: -1 }]) {
      assert.throws(() => new RetryPolicy(options), RangeError);
    }
  });

  test('a transient failure is retried until it succeeds', async () => {
    let calls = 0;
    const result = await new RetryPolicy({ initialMs: 1, maximumMs: 2 }).run(async () => {
      calls += 1;
      if (calls < 4) throw unavailable();
      return 'done';
    });
    assert.deepEqual([result, calls], ['done', 4]);
  });

  test('a permanent failure is thrown at once', async () => {
    let calls = 0;
    const failing = async () => {
      calls += 1;
      throw new NotFound(Code.NotFound, 'gone');
    };
    assert.ok((await rejection(new RetryPolicy({ initialMs: 1 }).run(failing))) instanceof NotFound);
    assert.equal(calls, 1);
  });

  test('attempts bound the tries', async () => {
    let calls = 0;
    const failing = async () => {
      calls += 1;
      throw unavailable();
    };
    await rejection(new RetryPolicy({ attempts: 3, initialMs: 1, maximumMs: 1 }).run(failing));
    assert.equal(calls, 3);
  });

  test('no try starts after the deadline', async () => {
    let calls = 0;
    const failing = async () => {
      calls += 1;
      throw unavailable();
    };
    await rejection(new RetryPolicy({ attempts: 100, initialMs: 1000, maximumMs: 1000, deadlineMs: 0 }).run(failing));
    assert.equal(calls, 1);
  });
});

describe('security', () => {
  test('loopback targets are told apart from the rest without resolving names', () => {
    const loopback = ['127.0.0.1:50051', 'localhost:1', '[::1]:50051', 'dns:///localhost:50051', 'ipv4:127.1.2.3:9', '127.0.0.1'];
    const remote = ['10.0.0.1:50051', 'example.com:443', '[2001:db8::1]:50051', 'localhost.example.com:1', 'dns:///example.com:50051'];
    assert.deepEqual(loopback.map(isLoopback), loopback.map(() => true));
    assert.deepEqual(remote.map(isLoopback), remote.map(() => false));
  });

  test('a bearer token in plaintext to another machine is refused before connecting', () => {
    const security = new ChannelSecurity({ token: 'secret-token' });
    assert.throws(() => TodoClient.connect('10.0.0.1:50051', { security }), /refusing to send a bearer token in plaintext/);
  });

  test('a bearer token in plaintext to this machine is allowed', () => {
    const security = new ChannelSecurity({ token: 'secret-token' });
    TodoClient.connect('127.0.0.1:50051', { security }).close();
  });

  test('a client certificate without its key is refused', () => {
    assert.throws(() => new ChannelSecurity({ tls: true, clientCertificate: 'PEM' }), /needs its key/);
  });
});

describe('feed position', () => {
  test('a snapshot cut short asks for a whole new one, announced by a RESET marker', () => {
    const position = new FeedPosition('', true);
    position.delivered('snapshot', '');
    const marker = position.interrupted();
    assert.deepEqual([marker?.kind, marker?.sessionId], ['reset', '']);
    assert.deepEqual([position.cursor, position.snapshot], ['', true]);
  });

  test('after the bookmark a feed resumes from the last cursor without a marker', () => {
    const position = new FeedPosition('', true);
    position.delivered('snapshot', '');
    position.delivered('progress', 'c1');
    position.delivered('todos_replaced', 'c2');
    assert.equal(position.interrupted(), undefined);
    assert.deepEqual([position.cursor, position.snapshot], ['c2', false]);
  });

  test('a message of an unknown kind still moves the cursor', () => {
    const position = new FeedPosition('c1', false);
    position.skipped('c2');
    assert.equal(position.cursor, 'c2');
  });

  test('a server-sent RESET is a snapshot until its bookmark', () => {
    const position = new FeedPosition('c1', false);
    position.delivered('reset', '');
    position.delivered('snapshot', '');
    assert.equal(position.interrupted()?.kind, 'reset');
  });
});

describe('keepalive', () => {
  test('closing a client while a watch is open leaves no keepalive behind', async () => {
    const keepaliveMs = 200;
    const closing = TodoClient.connect(required('SESSIONTODO_ADDRESS'), { keepaliveMs });
    const events = reader(closing.watch(await newSession()));
    await events.next();
    closing.close();
    // A keepalive left armed would ping the destroyed connection within one interval: wait three.
    await new Promise((resolve) => setTimeout(resolve, 3 * keepaliveMs));
  });
});
