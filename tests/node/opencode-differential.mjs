// The differential script: one `@opencode-ai/sdk` session (default and v2 clients) against a
// server at OPENCODE_URL — the real `opencode serve` or the sessiontodo sidecar — reporting what
// it saw. Driven by tests/opencode_real/test_opencode_differential.py, which compares the two
// reports and gives todos to sessions when asked: the script prints
// `{"need": "todos", "sessionID", "todos"}` on stdout and waits for a line on stdin (OpenCode
// gets them from the stub model's todowrite call, the sidecar over gRPC).
// The last stdout line is `{"report": …}`: shapes (types of every field) plus exact values where
// both servers must agree.
import { createInterface } from "node:readline";
import { createOpencodeClient } from "@opencode-ai/sdk";
import { createOpencodeClient as createV2Client } from "@opencode-ai/sdk/v2";

const baseUrl = process.env.OPENCODE_URL;
const directory = process.env.OPENCODE_DIRECTORY;
if (!baseUrl || !directory) throw new Error("set OPENCODE_URL and OPENCODE_DIRECTORY");
const MISSING = "ses_0000000000000000000000000"; // a well-formed id no server knows
const WAIT_MS = 60000;

const v1 = createOpencodeClient({ baseUrl, directory });
const v2 = createV2Client({ baseUrl, directory });
const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

/** The type of every field, recursively; arrays as the shapes of their elements. */
function shape(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return value.map(shape);
  if (typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, shape(value[key])]));
  }
  return typeof value;
}

async function needTodos(sessionID, todos) {
  console.log(JSON.stringify({ need: "todos", sessionID, todos }));
  const { done } = await stdinLines.next();
  if (done) throw new Error("the harness closed stdin");
}

/** Collect a stream's events of our sessions (and server.*) until `until(events)` or the deadline. */
function collect(stream, unwrap = (event) => event) {
  const events = [];
  let wake = () => {};
  const reading = (async () => {
    for await (const raw of stream) {
      events.push(raw);
      wake();
    }
  })().catch(() => {});
  return {
    events,
    reading,
    async until(predicate) {
      const deadline = Date.now() + WAIT_MS;
      while (!predicate(events.map(unwrap))) {
        if (Date.now() > deadline) throw new Error(`events never matched: ${JSON.stringify(events)}`);
        await new Promise((resolve) => {
          wake = resolve;
          setTimeout(resolve, 200);
        });
      }
    },
  };
}

const WATCHED_TYPES = new Set(["server.connected", "session.created", "session.updated", "session.deleted", "todo.updated"]);

function eventsOf(events, ids, unwrap = (event) => event) {
  return events
    .map(unwrap)
    .filter((event) => event && WATCHED_TYPES.has(event.type))
    .filter((event) => event.type === "server.connected" || ids.includes(event.properties?.sessionID))
    .map((event) => ({ type: event.type, session: ids.indexOf(event.properties?.sessionID), shape: shape(event) }));
}

async function answer(call) {
  const { data, error, response } = await call;
  return { status: response.status, contentType: response.headers.get("content-type"), data, error };
}

const describe = ({ status, contentType, data, error }) => ({
  status,
  contentType,
  data: data === undefined ? "undefined" : shape(data),
  error: error === undefined ? "undefined" : shape(error),
  errorName: error?.name ?? null,
});

const report = {};
const controllers = [new AbortController(), new AbortController(), new AbortController()];
const options = (i) => ({ signal: controllers[i].signal, sseMaxRetryAttempts: 1 });

// The event streams, opened before anything happens.
const head = await fetch(`${baseUrl}/event`, { signal: AbortSignal.timeout(WAIT_MS) });
report.eventHead = {
  status: head.status,
  contentType: head.headers.get("content-type"),
  cacheControl: head.headers.get("cache-control"),
  nosniff: head.headers.get("x-content-type-options"),
  accelBuffering: head.headers.get("x-accel-buffering"),
};
await head.body.cancel();
const onV1 = collect((await v1.event.subscribe(options(0))).stream);
const onV2 = collect((await v2.event.subscribe({}, options(1))).stream);
const onGlobal = collect((await v2.global.event(options(2))).stream, (event) => event.payload);
await Promise.all([onV1, onV2].map((s) => s.until((events) => events.length > 0)));

// Sessions: create (both clients), read, list.
const createdV1 = await answer(v1.session.create({ body: {} }));
const createdV2 = await answer(v2.session.create({ title: "differential" }));
const a = createdV1.data.id;
const b = createdV2.data.id;
report.create = { v1: describe(createdV1), v2: describe(createdV2), v2Title: createdV2.data.title };
report.getSession = { v1: describe(await answer(v1.session.get({ path: { id: a } }))) };
const listed = await answer(v2.session.list({}));
report.listSessions = { v2: describe({ ...listed, data: listed.data?.filter((s) => [a, b].includes(s.id)) }) };

// Todos: any status or priority string is kept as given.
const written = [
  { content: "Write the failing test", status: "completed", priority: "high" },
  { content: "Implement the feature", status: "in_progress", priority: "medium" },
  { content: "Ask for review", status: "blocked", priority: "urgent" },
];
await needTodos(a, written);
const todoV1 = await answer(v1.session.todo({ path: { id: a } }));
const todoV2 = await answer(v2.session.todo({ sessionID: a }));
const project = (todos) => todos.map(({ content, status, priority }) => ({ content, status, priority }));
report.todo = { v1: describe(todoV1), v2: describe(todoV2), v1Values: project(todoV1.data), v2Values: project(todoV2.data) };

// Errors of an unknown session.
report.errors = {
  todoV1: describe(await answer(v1.session.todo({ path: { id: MISSING } }))),
  todoV2: describe(await answer(v2.session.todo({ sessionID: MISSING }))),
  getV2: describe(await answer(v2.session.get({ sessionID: MISSING }))),
  deleteV1: describe(await answer(v1.session.delete({ path: { id: MISSING } }))),
};

// A late subscriber sees no replay of what happened before it connected.
const lateController = new AbortController();
const late = collect((await v2.event.subscribe({}, { signal: lateController.signal, sseMaxRetryAttempts: 1 })).stream);
await late.until((events) => events.length > 0);
await new Promise((resolve) => setTimeout(resolve, 1500));
lateController.abort();
report.lateSubscriber = eventsOf(late.events, [a, b]).map((event) => event.type);

// Deleting a session: `true`, then its todo route is NotFound.
const deleted = await answer(v2.session.delete({ sessionID: b }));
report.delete = { v2: describe(deleted), v2Data: deleted.data, todoAfter: describe(await answer(v2.session.todo({ sessionID: b }))) };

// Every stream saw both sessions' lifecycle and a's list.
const sawAll = (events) =>
  events.some((e) => e?.type === "todo.updated" && e.properties.sessionID === a) &&
  events.some((e) => e?.type === "session.deleted" && e.properties.sessionID === b);
await Promise.all([onV1.until(sawAll), onV2.until(sawAll), onGlobal.until(sawAll)]);
const lastTodos = (events) => events.filter((e) => e?.type === "todo.updated" && e.properties.sessionID === a).at(-1);
report.events = {
  v1: eventsOf(onV1.events, [a, b]),
  v2: eventsOf(onV2.events, [a, b]),
  global: eventsOf(onGlobal.events, [a, b], (event) => event.payload),
  globalEnvelopes: onGlobal.events
    .filter((event) => WATCHED_TYPES.has(event.payload?.type) && event.payload.type !== "server.connected")
    .filter((event) => [a, b].includes(event.payload.properties.sessionID))
    .map((event) => shape({ ...event, payload: null })),
  globalDirectories: [...new Set(onGlobal.events.filter((e) => e.payload?.properties?.sessionID === a).map((e) => e.directory))],
  lastTodosValues: project(lastTodos(onV2.events).properties.todos),
};
for (const controller of controllers) controller.abort();
console.log(JSON.stringify({ report }));
process.exit(0);
