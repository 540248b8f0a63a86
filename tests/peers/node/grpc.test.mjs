// A Node client built the way a TypeScript agent backend would build one: @grpc/grpc-js with
// @grpc/proto-loader reading protos/sessiontodo/v1/todo_service.proto at run time, no codegen.
//
// Driven by tests/peers/node/test_node_grpc.py, which starts the server and sets:
//   SESSIONTODO_ADDRESS   host:port of a running sessiontodo server
//   GOOGLEAPIS_PROTO_DIR  a folder holding google/rpc/status.proto and error_details.proto
// and, against a secured server (tests/system/test_security_processes.py):
//   SESSIONTODO_CA_FILE   PEM CA that signed the server certificate: connect with TLS
//   SESSIONTODO_TOKEN     bearer token sent with every call
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const ADDRESS = required('SESSIONTODO_ADDRESS');
const GOOGLEAPIS_PROTO_DIR = required('GOOGLEAPIS_PROTO_DIR');
const PROTO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../protos');
const CALL_DEADLINE_MS = 10_000;
const MESSAGE_TIMEOUT_MS = 10_000;

// The protobufjs that proto-loader itself uses, to decode google.rpc.Status details.
const protobuf = createRequire(createRequire(import.meta.url).resolve('@grpc/proto-loader'))('protobufjs');

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set (run through tests/peers/node/test_node_grpc.py)`);
  return value;
}

const definition = protoLoader.loadSync('sessiontodo/v1/todo_service.proto', {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
});
const { TodoService } = grpc.loadPackageDefinition(definition).sessiontodo.v1;
const client = new TodoService(ADDRESS, credentials());
after(() => client.close());

/** Plaintext, or TLS with the given CA plus a bearer token on every call, as a secured deployment needs. */
function credentials() {
  const caFile = process.env.SESSIONTODO_CA_FILE;
  if (!caFile) return grpc.credentials.createInsecure();
  const tls = grpc.credentials.createSsl(readFileSync(caFile));
  const token = process.env.SESSIONTODO_TOKEN;
  if (!token) return tls;
  const bearer = grpc.credentials.createFromMetadataGenerator((_params, callback) => {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    callback(null, metadata);
  });
  return grpc.credentials.combineChannelCredentials(tls, bearer);
}

/** One unary call as a promise, with a deadline (unary calls should always have one). */
function call(method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + CALL_DEADLINE_MS }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

/** The error a call fails with; fails the test if the call succeeds. */
async function failure(method, request) {
  try {
    await call(method, request);
  } catch (error) {
    return error;
  }
  assert.fail(`${method} succeeded`);
}

/** A WatchTodos (or WatchChanges) stream read message by message, each read bounded in time. No deadline: it is a watch. */
function watch(request, method = 'WatchTodos') {
  const stream = client[method](request);
  const queued = [];
  let waiting = null;
  const deliver = (item) => {
    if (waiting) {
      const { resolve } = waiting;
      waiting = null;
      resolve(item);
    } else {
      queued.push(item);
    }
  };
  stream.on('data', (message) => deliver({ message }));
  stream.on('error', (error) => deliver({ error }));
  stream.on('end', () => deliver({ end: true }));
  const nextItem = () =>
    queued.length
      ? Promise.resolve(queued.shift())
      : new Promise((resolve, reject) => {
          const timer = setTimeout(() => {
            waiting = null;
            reject(new Error(`no message within ${MESSAGE_TIMEOUT_MS} ms`));
          }, MESSAGE_TIMEOUT_MS);
          waiting = {
            resolve: (item) => {
              clearTimeout(timer);
              resolve(item);
            },
          };
        });
  return {
    /** The next message; fails on an error, the end of the stream or a timeout. */
    async next() {
      const item = await nextItem();
      if (item.error) throw item.error;
      assert.ok(item.message, 'the stream ended');
      return item.message;
    },
    /** The error the stream ends with. */
    async error() {
      const item = await nextItem();
      assert.ok(item.error, `expected an error, got ${JSON.stringify(item)}`);
      return item.error;
    },
    /** Resolves once the stream has ended with OK. */
    async end() {
      const item = await nextItem();
      assert.ok(item.end, `expected the end of the stream, got ${JSON.stringify(item)}`);
    },
    cancel: () => stream.cancel(),
  };
}

// google.rpc.Status and its details, loaded from googleapis' own .proto files.
const googleRpc = new protobuf.Root().loadSync(
  ['status.proto', 'error_details.proto'].map((file) => path.join(GOOGLEAPIS_PROTO_DIR, 'google/rpc', file)),
  { keepCase: true },
);
const Status = googleRpc.lookupType('google.rpc.Status');

/** The google.rpc details of a failed call, from the grpc-status-details-bin trailer, by type name. */
function richDetails(error) {
  const [encoded] = error.metadata.get('grpc-status-details-bin');
  assert.ok(encoded, 'the error carries grpc-status-details-bin');
  const status = Status.decode(encoded);
  assert.equal(status.code, error.code);
  return Object.fromEntries(
    status.details.map((any) => {
      const typeName = any.type_url.slice(any.type_url.lastIndexOf('/') + 1);
      return [typeName, googleRpc.lookupType(typeName).toObject(googleRpc.lookupType(typeName).decode(any.value))];
    }),
  );
}

const contents = (todos) => todos.map((todo) => todo.content);

/** A Todo as proto-loader decodes it with `defaults: true`: every field unset in `fields` at its default. */
const todo = (fields) => ({
  id: '',
  content: '',
  status: 'TODO_STATUS_UNSPECIFIED',
  priority: 'TODO_PRIORITY_UNSPECIFIED',
  metadata: {},
  description: '',
  active_form: '',
  owner: '',
  blocked_by: [],
  blocks: [],
  lease_expires_at: null,
  lease_duration: null,
  ...fields,
});

/** Revision `base` + `steps`: revisions are uint64, so proto-loader hands them over as strings. */
const plus = (base, steps) => String(BigInt(base) + BigInt(steps));

// Session ids unique to this run, so the tests never depend on what the server already holds.
const RUN = randomUUID().slice(0, 8);
const sessionId = (name) => `${name}-${RUN}`;

/** A new session's id. */
async function session(name) {
  const id = sessionId(name);
  await call('CreateSession', { session_id: id });
  return id;
}

describe('writes', () => {
  test('CreateSession creates a session once and then returns the existing one', async () => {
    const id = sessionId('node-create');
    const first = await call('CreateSession', { session_id: id });
    const again = await call('CreateSession', { session_id: id });

    assert.equal(first.created, true);
    assert.equal(again.created, false);
    assert.deepEqual(again.session, { ...first.session, todo_count: 0 });
    assert.equal(again.session.session_id, id);
  });

  test('ReplaceTodos keeps given ids, generates missing ones and returns enum names', async () => {
    const id = await session('node-replace');
    const { revision } = await call('GetTodos', { session_id: id });

    const response = await call('ReplaceTodos', {
      session_id: id,
      todos: [
        { id: 'plan', content: 'plan', status: 'TODO_STATUS_COMPLETED', priority: 'TODO_PRIORITY_HIGH' },
        { content: 'build' },
      ],
    });

    assert.equal(response.revision, plus(revision, 1));
    assert.deepEqual(
      response.todos[0],
      todo({ id: 'plan', content: 'plan', status: 'TODO_STATUS_COMPLETED', priority: 'TODO_PRIORITY_HIGH' }),
    );
    assert.ok(response.todos[1].id.length > 0);
    assert.equal(response.todos[1].status, 'TODO_STATUS_PENDING');
  });

  test('AddTodo inserts at an index and reports the position', async () => {
    const id = await session('node-add');
    const second = await call('AddTodo', { session_id: id, todo: { content: 'second' } });

    const response = await call('AddTodo', { session_id: id, todo: { content: 'first' }, index: 0 });

    assert.equal(response.index, 0);
    assert.equal(response.revision, plus(second.revision, 1));
    assert.deepEqual(contents((await call('GetTodos', { session_id: id })).todos), ['first', 'second']);
  });

  test('AddTodo with a repeated request_id adds the todo only once', async () => {
    const id = await session('node-add-retry');
    const request = { session_id: id, todo: { content: 'once' }, request_id: 'retry-1' };

    const first = await call('AddTodo', request);
    const retry = await call('AddTodo', request);

    assert.deepEqual(retry, first);
    assert.deepEqual(contents((await call('GetTodos', { session_id: id })).todos), ['once']);
  });

  test('UpdateTodo changes the status and leaves the unset fields alone', async () => {
    const id = await session('node-update');
    await call('AddTodo', { session_id: id, todo: { id: 't', content: 'ship', priority: 'TODO_PRIORITY_LOW' } });

    const response = await call('UpdateTodo', { session_id: id, todo_id: 't', status: 'TODO_STATUS_IN_PROGRESS' });

    assert.equal(response.changed, true);
    assert.deepEqual(
      response.todo,
      todo({ id: 't', content: 'ship', status: 'TODO_STATUS_IN_PROGRESS', priority: 'TODO_PRIORITY_LOW' }),
    );
  });

  test('RemoveTodo removes one todo and bumps the revision', async () => {
    const id = await session('node-remove-todo');
    const replaced = await call('ReplaceTodos', {
      session_id: id,
      todos: [
        { id: 'a', content: 'a' },
        { id: 'b', content: 'b' },
      ],
    });

    const response = await call('RemoveTodo', { session_id: id, todo_id: 'a' });

    assert.equal(response.revision, plus(replaced.revision, 1));
    assert.deepEqual(contents((await call('GetTodos', { session_id: id })).todos), ['b']);
  });

  test('RemoveSession removes the session with its children', async () => {
    const parent = await session('node-parent');
    const child = sessionId('node-child');
    await call('CreateSession', { session_id: child, parent_id: parent });

    const response = await call('RemoveSession', { session_id: parent });

    assert.equal(response.existed, true);
    assert.deepEqual([...response.removed_session_ids].sort(), [child, parent].sort());
  });
});

describe('watch', () => {
  test('WatchTodos sends a snapshot, then one message per change with revisions one apart', async () => {
    const id = await session('node-watch');
    const { revision } = await call('AddTodo', { session_id: id, todo: { id: 'a', content: 'a' } });
    const stream = watch({ session_id: id });
    try {
      const snapshot = await stream.next();
      await call('AddTodo', { session_id: id, todo: { id: 'b', content: 'b' } });
      await call('UpdateTodo', { session_id: id, todo_id: 'a', status: 'TODO_STATUS_COMPLETED' });
      await call('RemoveTodo', { session_id: id, todo_id: 'b' });
      const changes = [await stream.next(), await stream.next(), await stream.next()];

      assert.equal(snapshot.kind, 'CHANGE_KIND_SNAPSHOT');
      assert.equal(snapshot.revision, revision);
      assert.deepEqual(contents(snapshot.todos), ['a']);
      assert.deepEqual(
        changes.map((c) => [c.kind, c.revision, c.todo_id, contents(c.todos)]),
        [
          ['CHANGE_KIND_TODO_ADDED', plus(revision, 1), 'b', ['a', 'b']],
          ['CHANGE_KIND_TODO_UPDATED', plus(revision, 2), 'a', ['a', 'b']],
          ['CHANGE_KIND_TODO_REMOVED', plus(revision, 3), 'b', ['a']],
        ],
      );
      assert.equal(changes[1].todos[0].status, 'TODO_STATUS_COMPLETED');
    } finally {
      stream.cancel();
    }
  });

  test('a watch reopened with after_revision gets exactly the changes it missed', async () => {
    const id = await session('node-resume');
    const first = watch({ session_id: id });
    let lastSeen;
    try {
      lastSeen = (await first.next()).revision;
    } finally {
      first.cancel();
    }
    await call('AddTodo', { session_id: id, todo: { content: 'missed 1' } });
    await call('AddTodo', { session_id: id, todo: { content: 'missed 2' } });

    const resumed = watch({ session_id: id, after_revision: lastSeen });
    try {
      const missed = [await resumed.next(), await resumed.next()];
      await call('AddTodo', { session_id: id, todo: { content: 'live' } });
      const live = await resumed.next();

      assert.deepEqual(
        missed.map((m) => [m.kind, m.revision]),
        [
          ['CHANGE_KIND_TODO_ADDED', plus(lastSeen, 1)],
          ['CHANGE_KIND_TODO_ADDED', plus(lastSeen, 2)],
        ],
      );
      assert.deepEqual(contents(missed[1].todos), ['missed 1', 'missed 2']);
      assert.equal(live.revision, plus(lastSeen, 3));
    } finally {
      resumed.cancel();
    }
  });

  test('a cancelled watch ends locally with CANCELLED', async () => {
    const id = await session('node-cancel');
    const stream = watch({ session_id: id });
    await stream.next();

    stream.cancel();

    assert.equal((await stream.error()).code, grpc.status.CANCELLED);
  });

  test('removing the session ends its watch with SESSION_REMOVED and then OK', async () => {
    const id = await session('node-watch-removed');
    const stream = watch({ session_id: id });
    try {
      await stream.next();
      await call('RemoveSession', { session_id: id });

      assert.equal((await stream.next()).kind, 'CHANGE_KIND_SESSION_REMOVED');
      await stream.end();
    } finally {
      stream.cancel();
    }
  });
});

describe('sessions and the feed', () => {
  test('labels, metadata and origin round-trip, and GetSession reads the session', async () => {
    const id = sessionId('node-labels');
    await call('CreateSession', { session_id: id, labels: { title: 'Node' }, idle_ttl: { seconds: 3600 } });
    await call('ReplaceTodos', { session_id: id, todos: [{ id: 't', content: 'x', metadata: { 'ex.com/k': 'v' } }] });

    const { session } = await call('GetSession', { session_id: id });
    const { sessions, missing_session_ids } = await call('BatchGetTodos', { session_ids: [id, `${id}-ghost`] });

    assert.deepEqual(session.labels, { title: 'Node' });
    assert.equal(session.idle_ttl.seconds, '3600');
    assert.equal(session.revision, '1');
    assert.deepEqual(sessions[0].todos[0].metadata, { 'ex.com/k': 'v' });
    assert.deepEqual(missing_session_ids, [`${id}-ghost`]);
  });

  test('WatchChanges carries other sessions\' lifecycle and writes in order, with cursors to resume after', async () => {
    const id = sessionId('node-feed');
    const feed = watch({ include_snapshot: true, filter: { session_ids: [id] } }, 'WatchChanges');
    try {
      const bookmark = await feed.next(); // nothing matches yet: the snapshot is just its end
      assert.equal(bookmark.kind, 'CHANGE_KIND_PROGRESS');
      await call('CreateSession', { session_id: id, origin: 'node' });
      await call('AddTodo', { session_id: id, todo: { content: 'a' } });
      await call('UpdateSession', { session_id: id, labels: { title: 'T' } });
      await call('RemoveSession', { session_id: id });

      const messages = [await feed.next(), await feed.next(), await feed.next(), await feed.next()];

      assert.deepEqual(
        messages.map((m) => [m.kind, m.revision]),
        [
          ['CHANGE_KIND_SESSION_CREATED', '0'],
          ['CHANGE_KIND_TODO_ADDED', '1'],
          ['CHANGE_KIND_SESSION_UPDATED', '2'],
          ['CHANGE_KIND_SESSION_REMOVED', '3'],
        ],
      );
      assert.equal(messages[0].origin, 'node');
      assert.equal(messages[3].removal_reason, 'REMOVAL_REASON_REMOVED');
      assert.deepEqual(messages[2].session.labels, { title: 'T' });

      const resumed = watch({ after_cursor: messages[1].cursor, filter: { session_ids: [id] } }, 'WatchChanges');
      try {
        const later = [await resumed.next(), await resumed.next()];
        assert.deepEqual(later.map((m) => m.cursor), [messages[2].cursor, messages[3].cursor]);
      } finally {
        resumed.cancel();
      }
    } finally {
      feed.cancel();
    }
  });
});

describe('errors', () => {
  test('an unknown session is NOT_FOUND with an ErrorInfo naming it', async () => {
    const nobody = sessionId('node-nobody');

    const error = await failure('GetTodos', { session_id: nobody });

    assert.equal(error.code, grpc.status.NOT_FOUND);
    assert.deepEqual(richDetails(error)['google.rpc.ErrorInfo'], {
      reason: 'SESSION_NOT_FOUND',
      domain: 'sessiontodo.v1',
      metadata: { sessionId: nobody },
    });
  });

  test('invalid todos are INVALID_ARGUMENT with a BadRequest violation per bad field', async () => {
    const id = await session('node-invalid');
    const before = await call('GetTodos', { session_id: id });

    const error = await failure('ReplaceTodos', {
      session_id: id,
      todos: [{ content: 'fine' }, { content: '' }, { id: 'x', content: 'dup' }, { id: 'x', content: 'dup' }],
    });

    assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
    const fields = richDetails(error)['google.rpc.BadRequest'].field_violations.map((v) => v.field);
    assert.ok(fields.includes('todos[1].content'), fields.join(', '));
    assert.deepEqual(await call('GetTodos', { session_id: id }), before, 'nothing was written');
  });

  test('a stale expected_revision is ABORTED with the expected and actual revisions', async () => {
    const id = await session('node-aborted');
    const { revision } = await call('AddTodo', { session_id: id, todo: { content: 'a' } });
    const stale = plus(revision, -1);

    const error = await failure('AddTodo', { session_id: id, todo: { content: 'b' }, expected_revision: stale });

    assert.equal(error.code, grpc.status.ABORTED);
    const info = richDetails(error)['google.rpc.ErrorInfo'];
    assert.equal(info.reason, 'REVISION_MISMATCH');
    assert.deepEqual(info.metadata, { sessionId: id, expectedRevision: stale, actualRevision: revision });
  });

  test('watching an unknown session fails the stream with NOT_FOUND and its details', async () => {
    const stream = watch({ session_id: sessionId('node-nobody') });

    const error = await stream.error();

    assert.equal(error.code, grpc.status.NOT_FOUND);
    assert.equal(richDetails(error)['google.rpc.ErrorInfo'].reason, 'SESSION_NOT_FOUND');
  });
});
