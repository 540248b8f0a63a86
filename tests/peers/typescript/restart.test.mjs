// @sessiontodo/client across server restarts and crashes: retries while the service is down,
// watches and feeds that resume without loss or duplicates.
//
// Driven by test_typescript_client.py, which sets:
//   SESSIONTODO_SERVER_COMMAND  JSON argv of a sessiontodo server with a durable store, without --port
//   SESSIONTODO_ROOT            the checkout, where the server runs
// Each test starts its server processes on a free port and stops them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { after, test } from 'node:test';

import { reader, rejection, required, sessiontodo } from './support.mjs';

const { RetryPolicy, TodoClient, Unavailable } = sessiontodo;

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
