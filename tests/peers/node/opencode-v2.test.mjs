// Conformance of the sessiontodo OpenCode sidecar with OpenCode's v2 client
// (`@opencode-ai/sdk/v2`): flat parameters, and an error thrown on any text/html answer.
// Driven by tests/peers/opencode/test_opencode_sdk.py, which sets OPENCODE_URL.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createOpencodeClient } from "@opencode-ai/sdk/v2";
import { baseUrl, contents, growingLists, put, readEvents, todo, writeGrowingLists } from "./opencode-support.mjs";

const client = createOpencodeClient({ baseUrl });

async function newSession(parameters = {}) {
  const { data, error, response } = await client.session.create(parameters);
  assert.equal(response.status, 200, JSON.stringify(error));
  assert.ok(data.id);
  return data.id;
}

/** Subscribe with the v2 call and read past server.connected. */
async function subscribe(parameters = {}) {
  const controller = new AbortController();
  const { stream } = await client.event.subscribe(parameters, { signal: controller.signal, sseMaxRetryAttempts: 1 });
  return readEvents(stream, controller);
}

test("session.todo returns the session's list in order", async () => {
  const sessionID = await newSession();
  await put(sessionID, [todo("plan", "completed", "high"), todo("build", "in_progress")]);

  const { data, response } = await client.session.todo({ sessionID });

  assert.equal(response.status, 200);
  assert.deepEqual(
    data.map((t) => [t.content, t.status, t.priority]),
    [["plan", "completed", "high"], ["build", "in_progress", "medium"]],
  );
});

test("session.todo of an unknown session is a NotFoundError the SDK parses", async () => {
  const { data, error, response } = await client.session.todo({ sessionID: "ses_nobody" });

  assert.equal(response.status, 404);
  assert.equal(data, undefined);
  assert.deepEqual(error, { name: "NotFoundError", data: { message: "Session not found: ses_nobody" } });
  await assert.rejects(client.session.todo({ sessionID: "ses_nobody" }, { throwOnError: true }), {
    message: "Session not found: ses_nobody",
  });
});

test("event.subscribe yields only the right session's todo.updated, as full lists in order", async () => {
  const a = await newSession();
  const b = await newSession();
  const events = await subscribe();
  try {
    await Promise.all([writeGrowingLists(a), writeGrowingLists(b)]);
    const updates = await events.updates(10, [a, b]);

    for (const id of [a, b]) {
      assert.deepEqual(updates.filter((e) => e.properties.sessionID === id).map(contents), growingLists(id));
    }
  } finally {
    events.close();
  }
});

test("a sessionID query limits the stream to that session", async () => {
  const a = await newSession();
  const b = await newSession();
  const events = await subscribe({ $query_sessionID: a });
  try {
    await put(b, [todo("not for a")]);
    await put(a, [todo("for a")]);

    const update = await events.nextUpdate();
    assert.equal(update.properties.sessionID, a);
    assert.deepEqual(contents(update), ["for a"]);
  } finally {
    events.close();
  }
});

test("session.delete answers true and announces the session and its children as deleted", async () => {
  const parent = await newSession();
  const child = await newSession({ parentID: parent });
  const events = await subscribe();
  try {
    const { data, response } = await client.session.delete({ sessionID: parent });

    assert.equal(response.status, 200);
    assert.equal(data, true);
    const deleted = await events.ofType("session.deleted", 2, [parent, child]);
    assert.deepEqual(deleted.map((e) => e.properties.info.id).sort(), [child, parent].sort());
    assert.equal((await client.session.todo({ sessionID: parent })).response.status, 404);
  } finally {
    events.close();
  }
});

test("the directory and workspace options of the client are accepted and ignored", async () => {
  const scoped = createOpencodeClient({ baseUrl, directory: "/home/me/project", experimental_workspaceID: "wrk_1" });
  const { data } = await scoped.session.create({});
  await put(data.id, [todo("scoped")]);

  const read = await scoped.session.todo({ sessionID: data.id });

  assert.equal(read.response.status, 200);
  assert.deepEqual(read.data.map((t) => t.content), ["scoped"]);
});

test("an unknown route answers JSON, never the text/html the v2 client rejects", async () => {
  const { error, response } = await client.session.children({ sessionID: "ses_nobody" });

  assert.equal(response.status, 404);
  assert.equal(response.headers.get("content-type"), "application/json");
  assert.equal(error.name, "NotFoundError");
});
