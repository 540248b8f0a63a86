// Conformance of the sessiontodo OpenCode sidecar with OpenCode's own default client
// (`@opencode-ai/sdk`). Its SSE parser splits frames on "\n\n" without normalising CR, so
// receiving any event here also proves the stream's LF-only framing.
// Driven by tests/peers/opencode/test_opencode_sdk.py, which sets OPENCODE_URL.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createOpencodeClient } from "@opencode-ai/sdk";
import { baseUrl, contents, growingLists, put, readEvents, todo, within, writeGrowingLists } from "./opencode-support.mjs";

const client = createOpencodeClient({ baseUrl });

async function newSession(body = {}) {
  const { data, error, response } = await client.session.create({ body });
  assert.equal(response.status, 200, JSON.stringify(error));
  assert.ok(data.id);
  return data.id;
}

/** Subscribe with the default client's call and read past server.connected. */
async function subscribe(options = {}) {
  const controller = new AbortController();
  const { stream } = await client.event.subscribe({ signal: controller.signal, sseMaxRetryAttempts: 1, ...options });
  return readEvents(stream, controller);
}

test("session.todo returns the session's list in order, with ids", async () => {
  const id = await newSession();
  const written = await put(id, [todo("plan", "completed", "high"), todo("build", "in_progress"), todo("ship", "cancelled", "low")]);

  const { data, error, response } = await client.session.todo({ path: { id } });

  assert.equal(response.status, 200);
  assert.equal(error, undefined);
  assert.deepEqual(data, written);
  assert.deepEqual(
    data.map((t) => [t.content, t.status, t.priority]),
    [["plan", "completed", "high"], ["build", "in_progress", "medium"], ["ship", "cancelled", "low"]],
  );
  assert.ok(data.every((t) => typeof t.id === "string" && t.id.length > 0));
});

test("session.todo of an unknown session is a NotFoundError the SDK parses", async () => {
  const { data, error, response } = await client.session.todo({ path: { id: "ses_nobody" } });

  assert.equal(response.status, 404);
  assert.equal(data, undefined);
  assert.deepEqual(error, { name: "NotFoundError", data: { message: "Session not found: ses_nobody" } });
  await assert.rejects(client.session.todo({ path: { id: "ses_nobody" }, throwOnError: true }), {
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
      const lists = updates.filter((e) => e.properties.sessionID === id).map(contents);
      assert.deepEqual(lists, growingLists(id));
    }
    assert.ok(updates.every((e) => /^evt_/.test(e.id)));
  } finally {
    events.close();
  }
});

test("a sessionID query limits the stream to that session", async () => {
  const a = await newSession();
  const b = await newSession();
  const events = await subscribe({ query: { sessionID: a } });
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
  await put(child, [todo("child work")]);
  const events = await subscribe();
  try {
    const { data, response } = await client.session.delete({ path: { id: parent } });

    assert.equal(response.status, 200);
    assert.equal(data, true);
    const deleted = await events.ofType("session.deleted", 2, [parent, child]);
    assert.deepEqual(deleted.map((e) => e.properties.info.id).sort(), [child, parent].sort());
    const { error } = await client.session.todo({ path: { id: child } });
    assert.equal(error.name, "NotFoundError");
  } finally {
    events.close();
  }
});

test("session.delete of an unknown session is a NotFoundError", async () => {
  const { error, response } = await client.session.delete({ path: { id: "ses_nobody" } });

  assert.equal(response.status, 404);
  assert.deepEqual(error, { name: "NotFoundError", data: { message: "Session not found: ses_nobody" } });
});

test("the directory option of the client is accepted and ignored", async () => {
  const scoped = createOpencodeClient({ baseUrl, directory: "/home/me/project" });
  const { data, response } = await scoped.session.create({ body: {} });
  assert.equal(response.status, 200);
  await put(data.id, [todo("scoped")]);

  const read = await scoped.session.todo({ path: { id: data.id } });

  assert.deepEqual(read.data.map((t) => t.content), ["scoped"]);
});

test("frames on the wire are exactly `data: <json>` lines ending in LF LF", async () => {
  const controller = new AbortController();
  const response = await fetch(`${baseUrl}/event`, { signal: controller.signal });
  try {
    assert.equal(response.headers.get("content-type"), "text/event-stream");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const readFirstFrame = async () => {
      let text = "";
      while (!text.includes("\n\n")) text += (await reader.read()).value;
      return text;
    };
    const text = await within(readFirstFrame(), "frame ending in LF LF");

    assert.match(text, /^data: \{"id":"evt_[^"]+","type":"server\.connected","properties":\{\}\}\n\n/);
    assert.ok(!text.includes("\r"));
  } finally {
    controller.abort();
  }
});
