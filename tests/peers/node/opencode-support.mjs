// Helpers shared by the OpenCode SDK conformance suites (opencode.test.mjs, opencode-v2.test.mjs).
import assert from "node:assert/strict";

export const baseUrl = process.env.OPENCODE_URL;
assert.ok(baseUrl, "OPENCODE_URL must name the sidecar, e.g. http://127.0.0.1:4096");
const WAIT_MS = 10_000; // a bound only: an event later than this on a loaded machine is not a failure of the sidecar

export function todo(content, status = "pending", priority = "medium") {
  return { content, status, priority };
}

export const contents = (event) => event.properties.todos.map((t) => t.content);

/** Write a whole list through the sidecar's PUT route (OpenCode's SDK has no write call). */
export async function put(id, todos) {
  const response = await fetch(`${baseUrl}/session/${id}/todo`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(todos),
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text);
}

const SKIPPED = new Set(["server.heartbeat", "session.created", "session.updated", "session.deleted", "todo.updated"]);

export function within(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${WAIT_MS} ms`)), WAIT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Read an SDK event stream past `server.connected`. `updates(count, ids)` returns the next
 * `count` todo.updated events of the sessions in `ids` (`ofType(type, count, ids)`: of any
 * type), skipping heartbeats, other events and other tests' sessions.
 * `close()` aborts the stream.
 */
export async function readEvents(stream, controller) {
  const events = stream[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await within(events.next(), "event");
    assert.ok(!done, "the event stream ended");
    return value;
  };
  const nextOf = async (type) => {
    for (;;) {
      const event = await next();
      if (event.type === type) return event;
      assert.ok(SKIPPED.has(event.type), JSON.stringify(event));
    }
  };
  const nextUpdate = () => nextOf("todo.updated");
  /** The next `count` events of `type` about the sessions in `ids`, skipping other tests' sessions. */
  const ofType = async (type, count, ids) => {
    const received = [];
    while (received.length < count) {
      const event = await nextOf(type);
      if (ids.includes(event.properties.sessionID)) received.push(event);
    }
    return received;
  };
  const updates = (count, ids) => ofType("todo.updated", count, ids);
  try {
    const first = await next();
    assert.equal(first.type, "server.connected");
    assert.match(first.id, /^evt_/);
  } catch (error) {
    controller.abort(); // an open stream would keep the test process alive
    throw error;
  }
  return { next, nextUpdate, updates, ofType, close: () => controller.abort() };
}

/** The lists `put` writes in `writes(id)`: n todos named `<id>-0 … <id>-(n-1)`, for n = 1..5. */
export const growingLists = (id) => [1, 2, 3, 4, 5].map((n) => Array.from({ length: n }, (_, k) => `${id}-${k}`));

export async function writeGrowingLists(id) {
  for (const list of growingLists(id)) await put(id, list.map((content) => todo(content)));
}
