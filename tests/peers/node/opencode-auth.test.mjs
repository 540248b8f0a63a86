// OpenCode's own client (`@opencode-ai/sdk`) against a sidecar that requires basic auth, set up
// the way OpenCode's server is: OPENCODE_SERVER_PASSWORD (and OPENCODE_SERVER_USERNAME).
// Driven by tests/peers/opencode/test_opencode_guard.py, which sets OPENCODE_URL and both variables.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createOpencodeClient } from "@opencode-ai/sdk";

const baseUrl = process.env.OPENCODE_URL;
const username = process.env.OPENCODE_SERVER_USERNAME ?? "opencode";
const password = process.env.OPENCODE_SERVER_PASSWORD;
assert.ok(baseUrl && password, "OPENCODE_URL and OPENCODE_SERVER_PASSWORD must be set");
const authorization = `Basic ${Buffer.from(`${username}:${password}`).toString("base64")}`;

const client = createOpencodeClient({ baseUrl, headers: { Authorization: authorization } });

test("a client sending the credentials creates a session and reads its todos", async () => {
  const created = await client.session.create({ body: {} });
  assert.equal(created.response.status, 200, JSON.stringify(created.error));

  const { data, response } = await client.session.todo({ path: { id: created.data.id } });

  assert.equal(response.status, 200);
  assert.deepEqual(data, []);
});

test("a client sending the credentials receives the event stream", async () => {
  const controller = new AbortController();
  const { stream } = await client.event.subscribe({ signal: controller.signal, sseMaxRetryAttempts: 1 });
  try {
    const { value } = await stream[Symbol.asyncIterator]().next();
    assert.equal(value.type, "server.connected");
  } finally {
    controller.abort();
  }
});

test("a client without credentials, or with a wrong password, gets 401", async () => {
  const wrong = `Basic ${Buffer.from(`${username}:not-${password}`).toString("base64")}`;
  for (const headers of [{}, { Authorization: wrong }]) {
    const anonymous = createOpencodeClient({ baseUrl, headers });
    const { data, response } = await anonymous.session.create({ body: {} });
    assert.equal(response.status, 401);
    assert.equal(data, undefined);
    assert.match(response.headers.get("www-authenticate") ?? "", /^Basic /);
  }
});
