// @sessiontodo/client against a server with TLS and bearer tokens: the CA and token files a
// deployment hands out, and the typed errors of missing or insufficient tokens.
//
// Driven by test_typescript_client.py, which starts the server and sets:
//   SESSIONTODO_ADDRESS            host:port of the server (TLS for 127.0.0.1, tokens required)
//   SESSIONTODO_CA_FILE            PEM CA that signed the server certificate
//   SESSIONTODO_WRITER_TOKEN_FILE  a file holding a writer's token (with a trailing newline)
//   SESSIONTODO_READER_TOKEN_FILE  a file holding a reader's token
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { rejection, required, sessiontodo } from './support.mjs';

const { ChannelSecurity, PermissionDenied, RetryPolicy, TodoClient, Unauthenticated, Unavailable } = sessiontodo;

const ADDRESS = required('SESSIONTODO_ADDRESS');
const caFile = required('SESSIONTODO_CA_FILE');

const clients = [];
after(() => clients.forEach((client) => client.close()));

function connect(security) {
  const client = TodoClient.connect(ADDRESS, { security, retry: new RetryPolicy({ attempts: 1 }) });
  clients.push(client);
  return client;
}

const writer = connect(ChannelSecurity.fromFiles({ caFile, tokenFile: required('SESSIONTODO_WRITER_TOKEN_FILE') }));

test('a writer with the CA and its token file writes and reads over TLS', async () => {
  await writer.createSession({ sessionId: 'tls' });
  await writer.replaceTodos('tls', [{ content: 'Rotate the keys' }]);
  assert.deepEqual((await writer.getTodos('tls')).todos.map((t) => t.content), ['Rotate the keys']);
});

test('a reader may read but not write', async () => {
  await writer.createSession({ sessionId: 'tls-read' });
  const reader = connect(ChannelSecurity.fromFiles({ caFile, tokenFile: required('SESSIONTODO_READER_TOKEN_FILE') }));
  assert.equal((await reader.getTodos('tls-read')).revision, 0n);
  assert.ok((await rejection(reader.removeSession('tls-read'))) instanceof PermissionDenied);
});

test('a call without a token is UNAUTHENTICATED', async () => {
  const anonymous = connect(ChannelSecurity.fromFiles({ caFile }));
  assert.ok((await rejection(anonymous.getTodos('tls'))) instanceof Unauthenticated);
});

test('a server certificate from another CA is refused', async () => {
  const trustingNobody = connect(new ChannelSecurity({ tls: true, token: 'any' }));
  assert.ok((await rejection(trustingNobody.getTodos('tls'))) instanceof Unavailable);
});
