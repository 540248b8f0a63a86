// @sessiontodo/client across server restarts and crashes: retries while the service is down
// (conditional updates included), a conditional update and a batch whose replies were lost, watches
// and feeds that resume without loss or duplicates.
//
// Driven by test_typescript_client.py, which sets:
//   SESSIONTODO_SERVER_COMMAND  JSON argv of a sessiontodo server with a durable store, without --port
//   SESSIONTODO_ROOT            the checkout, where the server runs
// Each test starts its server processes on a free port and stops them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { after, test } from 'node:test';

import { reader, rejection, required, sessiontodo } from './support.mjs';

const { Aborted, NotReady, RetryPolicy, TodoClient, Unavailable } = sessiontodo;

const COMMAND = JSON.parse(required('SESSIONTODO_SERVER_COMMAND'));
const ROOT = required('SESSIONTODO_ROOT');
/** Long enough for a server process to start (about a second), short delays between tries. */
const PATIENT = new RetryPolicy({ attempts: 200, initialMs: 20, maximumMs: 200, deadlineMs: 60_000 });

const running = new Set();
after(() => running.forEach((server) => server.kill('SIGKILL')));

async function freePort() {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address();
  probe.close();
  return port;
}

/** A server process on `port`; stop it with `stop(server, signal)`. */
function startServer(port) {
  const server = spawn(COMMAND[0], [...COMMAND.slice(1), '--port', String(port)], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  running.add(server);
  return server;
}

async function stop(server, signal) {
  const exited = once(server, 'exit');
  server.kill(signal);
  await exited;
  running.delete(server);
}

/** A client whose calls wait out a server that is (re)starting. */
function patientClient(port) {
  return TodoClient.connect(`127.0.0.1:${port}`, { retry: PATIENT });
}

test('unary calls are retried until the service comes up', async () => {
  const port = await freePort();
  const client = patientClient(port);
  const creating = client.createSession({ sessionId: 'late' });
  const server = startServer(port);
  const { session, created } = await creating;
  client.close();
  await stop(server, 'SIGTERM');
  assert.deepEqual([session.sessionId, created], ['late', true]);
});

test('a call made before the server starts waits for it within its timeout, and says so once', async () => {
  const port = await freePort();
  const told = [];
  const client = TodoClient.connect(`127.0.0.1:${port}`, { timeoutMs: 60_000, onWaiting: (line) => told.push(line) });
  const creating = [client.createSession({ sessionId: 'early' }), client.listSessions()];
  while (told.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
  const server = startServer(port);
  const [{ created }] = await Promise.all(creating);
  client.close();
  await stop(server, 'SIGTERM');
  assert.equal(created, true);
  assert.deepEqual(told, [
    `sessiontodo at 127.0.0.1:${port} does not accept connections yet: calls wait up to 60s each for it`,
  ]);
});

test('a server that never comes is NotReady (an Unavailable) when the call times out', async () => {
  const port = await freePort();
  const client = TodoClient.connect(`127.0.0.1:${port}`, { timeoutMs: 500, onWaiting: () => {} });
  const error = await rejection(client.getTodos('nobody'));
  client.close();
  assert.ok(error instanceof NotReady && error instanceof Unavailable);
  assert.equal(error.rawMessage, `sessiontodo at 127.0.0.1:${port} did not accept a connection within 0.5s`);
});

/** A session with one todo, on the server at `port`; its todo and revision. */
async function sessionWithTodo(port, sessionId) {
  const client = patientClient(port);
  await client.createSession({ sessionId });
  const { todo, revision } = await client.addTodo(sessionId, { content: 'ship it' });
  client.close();
  return { todo, revision };
}

test('a conditional todo update is retried until the service comes up, and applied once', async () => {
  const port = await freePort();
  let server = startServer(port);
  const { todo, revision } = await sessionWithTodo(port, 'conditional-todo');
  await stop(server, 'SIGTERM');
  const client = patientClient(port);

  const updating = client.updateTodo('conditional-todo', todo.id, { status: 'completed', expectedRevision: revision });
  server = startServer(port);
  let updated, stored;
  try {
    updated = await updating;
    stored = await client.getTodos('conditional-todo');
  } finally {
    client.close();
    await stop(server, 'SIGTERM');
  }

  assert.deepEqual(
    [updated.revision, stored.revision, stored.todos[0].status],
    [revision + 1n, revision + 1n, 'completed'],
  );
});

test('a conditional session update is retried until the service comes up, and applied once', async () => {
  const port = await freePort();
  let server = startServer(port);
  const { revision } = await sessionWithTodo(port, 'conditional-session');
  await stop(server, 'SIGTERM');
  const client = patientClient(port);

  const updating = client.updateSession('conditional-session', { labels: { stage: 'done' }, expectedRevision: revision });
  server = startServer(port);
  let updated, stored;
  try {
    updated = await updating;
    stored = await client.getSession('conditional-session');
  } finally {
    client.close();
    await stop(server, 'SIGTERM');
  }

  assert.deepEqual(
    [updated.session.revision, stored.revision, stored.labels.stage],
    [revision + 1n, revision + 1n, 'done'],
  );
});

/**
 * A TCP proxy to the server at `port` that can lose replies: after `hold()` nothing the server
 * sends reaches the client; `cut()` then breaks every connection through it and lets replies
 * through again, as a network that failed after the server applied a write.
 */
async function replyLosingProxy(port) {
  const sockets = new Set();
  let holding = false;
  const proxy = createServer((downstream) => {
    const upstream = connect(port, '127.0.0.1');
    for (const socket of [downstream, upstream]) sockets.add(socket);
    downstream.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => holding || downstream.write(chunk));
    for (const [socket, other] of [[downstream, upstream], [upstream, downstream]]) {
      socket.on('error', () => other.destroy());
      socket.on('close', () => other.destroy());
    }
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  return {
    port: proxy.address().port,
    hold: () => (holding = true),
    cut: () => {
      sockets.forEach((socket) => socket.destroy());
      sockets.clear();
      holding = false;
    },
    close: () => proxy.close(),
  };
}

/**
 * A server holding `sessionId` with one todo; a client on it watching the changes after that, and
 * a client whose calls go through a `replyLosingProxy` (its connection open). `end()` stops them.
 */
async function lostReplyScene(sessionId) {
  const port = await freePort();
  const server = startServer(port);
  const { todo, revision } = await sessionWithTodo(port, sessionId);
  const direct = patientClient(port);
  const changes = reader(direct.watch(sessionId, { afterRevision: revision }));
  const proxy = await replyLosingProxy(port);
  const client = TodoClient.connect(`127.0.0.1:${proxy.port}`, { retry: new RetryPolicy({ initialMs: 20 }) });
  await client.getSession(sessionId); // the connection through the proxy is open
  return {
    todo,
    revision,
    direct,
    changes,
    proxy,
    client,
    async end() {
      await changes.close();
      for (const closing of [client, direct, proxy]) closing.close();
      await stop(server, 'SIGTERM');
    },
  };
}

test('a retried conditional update whose reply was lost never overwrites a later change: it answers Aborted', async () => {
  const scene = await lostReplyScene('lost-reply');
  const { todo, revision, direct, changes, proxy, client } = scene;

  let error, stored;
  try {
    proxy.hold();
    const updating = rejection(client.updateTodo('lost-reply', todo.id, { status: 'completed', expectedRevision: revision }));
    await changes.next(); // applied; its reply is held back
    await direct.updateTodo('lost-reply', todo.id, { status: 'in_progress' }); // someone else's later change
    proxy.cut();
    error = await updating;
    stored = await direct.getTodos('lost-reply');
  } finally {
    await scene.end();
  }

  assert.ok(error instanceof Aborted, String(error));
  assert.deepEqual([stored.revision, stored.todos[0].status], [revision + 2n, 'in_progress']);
});

test('a batch whose reply was lost is retried under its request id: the first results, written once', async () => {
  const scene = await lostReplyScene('lost-batch');
  const { revision, direct, changes, proxy, client } = scene;

  let results, stored;
  try {
    proxy.hold();
    const batching = client.batchWrite([
      { kind: 'add_todo', sessionId: 'lost-batch', todo: { content: 'one' } },
      { kind: 'add_todo', sessionId: 'lost-batch', todo: { content: 'two' } },
    ]);
    await changes.next(); // applied; its reply is held back
    proxy.cut();
    results = await batching;
    stored = await direct.getTodos('lost-batch');
  } finally {
    await scene.end();
  }

  assert.deepEqual(results.map((result) => result.revision), [revision + 1n, revision + 2n]);
  assert.deepEqual(stored.todos.map((todo) => todo.content), ['ship it', 'one', 'two']);
});

test('a claim whose reply was lost is retried under its request id: the first claim, claimed once', async () => {
  const scene = await lostReplyScene('lost-claim');
  const { todo, direct, changes, proxy, client } = scene;

  let claim, stored;
  try {
    proxy.hold();
    const claiming = client.claimTodo('lost-claim', { owner: 'worker-1' });
    await changes.next(); // applied; its reply is held back
    proxy.cut();
    claim = await claiming;
    stored = await direct.getTodos('lost-claim');
  } finally {
    await scene.end();
  }

  // Without the request id the retry would find nothing ready (its first try took the only todo).
  assert.equal(claim.todo?.id, todo.id);
  assert.deepEqual([stored.todos[0].owner, stored.todos[0].status], ['worker-1', 'in_progress']);
});

test('a replace is not retried while the service is down: the caller decides', async () => {
  const port = await freePort();
  const client = patientClient(port);
  const error = await rejection(client.replaceTodos('any', [{ content: 'maybe twice' }]));
  client.close();
  assert.ok(error instanceof Unavailable);
});

/** Writes `count` lists to `sessionId` through a fresh client, once the server answers (writes are not retried). */
async function writeLists(port, sessionId, first, count) {
  const writer = patientClient(port);
  await writer.getSession(sessionId);
  for (let n = first; n < first + count; n += 1) await writer.replaceTodos(sessionId, [{ content: `list ${n}` }]);
  writer.close();
}

for (const [how, signal] of [
  ['a graceful restart', 'SIGTERM'],
  ['a crash', 'SIGKILL'],
]) {
  test(`a watch resumes after ${how} without loss or duplicates`, async () => {
    const port = await freePort();
    let server = startServer(port);
    const client = patientClient(port);
    await client.createSession({ sessionId: `watched-${signal}` });
    const events = reader(client.watch(`watched-${signal}`));
    const revisions = [(await events.next()).revision];
    await writeLists(port, `watched-${signal}`, 1, 3);
    for (let n = 0; n < 3; n += 1) revisions.push((await events.next()).revision);

    await stop(server, signal);
    server = startServer(port);
    await writeLists(port, `watched-${signal}`, 4, 3);
    for (let n = 0; n < 3; n += 1) revisions.push((await events.next()).revision);
    await events.close();
    client.close();
    await stop(server, 'SIGTERM');

    assert.deepEqual(revisions, [0n, 1n, 2n, 3n, 4n, 5n, 6n]);
  });
}

test('a feed resumes after a restart from its last cursor without loss or duplicates', async () => {
  const port = await freePort();
  let server = startServer(port);
  const client = patientClient(port);
  await client.createSession({ sessionId: 'fed', labels: { feed: 'restart' } });
  const events = reader(client.watchChanges({ includeSnapshot: true, includeProgress: true, labels: { feed: 'restart' } }));
  await events.next(); // the snapshot
  await events.next(); // its bookmark
  await writeLists(port, 'fed', 1, 2);
  const seen = [(await events.nextChange()).revision, (await events.nextChange()).revision];

  await stop(server, 'SIGTERM');
  server = startServer(port);
  await writeLists(port, 'fed', 3, 2);
  while (seen.length < 4) seen.push((await events.nextChange()).revision);
  await events.close();
  client.close();
  await stop(server, 'SIGTERM');

  assert.deepEqual(seen, [1n, 2n, 3n, 4n]);
});
