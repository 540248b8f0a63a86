// The differential script: one `@opencode-ai/sdk` session (default and v2 clients) against a
// server at OPENCODE_URL — the real `opencode serve` or the sessiontodo sidecar — reporting what
// it saw. Driven by tests/peers/opencode_real/test_opencode_differential.py, which compares the two
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
const EVENTS_MS = 10000; // upstream publishes within a second

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

/** Collect a stream's events; `until(predicate)` waits for them to match, the stream to end, or the deadline. */
function collect(stream, unwrap = (event) => event) {
  const events = [];
  let ended = false;
  let wake = () => {};
  (async () => {
    for await (const raw of stream) {
      events.push(raw);
      wake();
    }
  })()
    .catch(() => {})
    .finally(() => {
      ended = true;
      wake();
    });
  return {
    events,
    unwrap,
    /** Wait until the events match, the stream ends or `ms` pass: a missing event shows in the report. */
    async until(predicate, ms = WAIT_MS) {
      const deadline = Date.now() + ms;
      while (!predicate(events.map(unwrap)) && !ended && Date.now() < deadline) {
        await new Promise((resolve) => {
          wake = resolve;
          setTimeout(resolve, 200);
        });
      }
    },
  };
}

const WATCHED_TYPES = new Set(["server.connected", "session.created", "session.updated", "session.deleted", "todo.updated"]);
const SYNCED_TYPES = new Set(["session.created.1", "session.updated.1", "session.deleted.1"]);

/** The sync frames of our sessions' events on /global/event: their order (session.updated.1 left out, as
 * in eventsOf), the shape of each type, and whether each frame repeats its event's id and properties. */
function syncsOf(frames, ids) {
  const payloads = frames.map((frame) => frame.payload).filter(Boolean);
  const syncs = payloads
    .filter((payload) => payload.type === "sync" && SYNCED_TYPES.has(payload.syncEvent?.type))
    .filter((payload) => ids.includes(payload.syncEvent.aggregateID));
  const shapes = {};
  for (const sync of syncs) shapes[sync.syncEvent.type] = shape(sync);
  const eventsById = new Map(payloads.filter((payload) => payload.type !== "sync").map((payload) => [payload.id, payload]));
  return {
    order: syncs
      .filter((sync) => sync.syncEvent.type !== "session.updated.1")
      .map((sync) => `${sync.syncEvent.type}#${ids.indexOf(sync.syncEvent.aggregateID)}`),
    shapes,
    repeatTheirEvent: [
      ...new Set(
        syncs.map((sync) => {
          const event = eventsById.get(sync.id);
          return sync.syncEvent.id === sync.id && JSON.stringify(event?.properties) === JSON.stringify(sync.syncEvent.data);
        }),
      ),
    ],
    seqGrowsPerSession: ids.map((id) => {
      const seqs = syncs.filter((sync) => sync.syncEvent.aggregateID === id).map((sync) => sync.syncEvent.seq);
      return seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]);
    }),
  };
}

/** Our sessions' events (and server.connected): their order as `type#session`, and each type's shape. */
function eventsOf(events, ids, unwrap = (event) => event) {
  const ours = events
    .map(unwrap)
    .filter((event) => event && WATCHED_TYPES.has(event.type))
    .filter((event) => event.type === "server.connected" || ids.includes(event.properties?.sessionID));
  const shapes = {};
  for (const event of ours) shapes[event.type] = shape(event); // the last of each type: the most complete
  // session.updated is compared by shape only: upstream also sends it for its own prompt's title and status.
  const order = ours
    .filter((event) => event.type !== "session.updated")
    .map((event) => (event.type === "server.connected" ? event.type : `${event.type}#${ids.indexOf(event.properties.sessionID)}`));
  return { order, shapes };
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

// Upstream boots a directory's instance on its first request, and /global/event misses events of
// an instance that boots meanwhile: read once so that the instance runs before anything happens.
await v2.session.list({});

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
// Upstream's /global/event starts forwarding a little after its server.connected: create probe
// sessions until one shows on every stream, so the streams are live before the observed part.
const probed = (id) => (events) => events.some((e) => e?.type === "session.created" && e.properties.sessionID === id);
for (let attempt = 0; ; attempt++) {
  const probe = (await v2.session.create({ title: "probe" })).data.id;
  const streams = [onV1, onV2, onGlobal];
  await Promise.all(streams.map((on) => on.until(probed(probe), 1000)));
  if (streams.every((on) => probed(probe)(on.events.map(on.unwrap)))) break;
  if (attempt === 20) throw new Error("the event streams never carried a probe session");
}

// Sessions: create (both clients), read, list.
const createdV1 = await answer(v1.session.create({ body: {} }));
const createdV2 = await answer(v2.session.create({ title: "differential" }));
const a = createdV1.data.id;
const b = createdV2.data.id;
report.create = { v1: describe(createdV1), v2: describe(createdV2), v2Title: createdV2.data.title };
report.getSession = { v1: describe(await answer(v1.session.get({ path: { id: a } }))) };
const listed = await answer(v2.session.list({}));
report.listSessions = { v2: describe({ ...listed, data: listed.data?.filter((s) => [a, b].includes(s.id)) }) };

// Listing's query, children, and the routes beside sessions.
const child = (await v2.session.create({ parentID: a, title: "differential child" })).data.id;
const ours = (call) => call.then(({ data }) => (data ?? []).filter((s) => [a, b, child].includes(s.id)).map((s) => [a, b, child].indexOf(s.id)));
report.listQueries = {
  roots: (await ours(v2.session.list({ roots: true }))).sort(),
  all: (await ours(v2.session.list({ roots: false }))).sort(),
  search: await ours(v2.session.list({ search: "DIFFERENTIAL CHILD" })),
  limitCount: (await v2.session.list({ limit: 1 })).data.length,
  limitZeroCount: (await v2.session.list({ limit: 0 })).data.length,
  badRoots: describe(await answer(v2.session.list({ roots: "maybe" }))),
  badRootsKind: (await v2.session.list({ roots: "maybe" })).error?.data?.kind ?? null,
};
report.children = {
  v2: describe(await answer(v2.session.children({ sessionID: a }))),
  ids: ((await v2.session.children({ sessionID: a })).data ?? []).map((s) => s.id === child),
  missing: describe(await answer(v2.session.children({ sessionID: MISSING }))),
};
const status = await answer(v2.session.status({}));
report.status = { v2: describe(status), ours: Object.keys(status.data ?? {}).filter((id) => [a, b, child].includes(id)) };
report.health = { v2: describe(await answer(v2.global.health())) };
const path = await answer(v2.path.get({}));
report.path = { v2: describe(path), directory: path.data?.directory === directory, worktree: path.data?.worktree === directory };
const projects = await answer(v2.project.list({}));
report.project = {
  list: describe(projects),
  current: describe(await answer(v2.project.current({}))),
  currentWorktree: (await v2.project.current({})).data?.worktree === directory,
};
report.createBadBody = { v2: describe(await answer(v2.session.create({ parentID: 5 }))) };

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

// A rename: session.update answers the Session, and a session.updated event follows.
const renamed = await answer(v2.session.update({ sessionID: a, title: "renamed" }));
report.update = { v2: describe(renamed), v2Title: renamed.data?.title ?? null };

// Errors of an unknown session.
report.errors = {
  todoV1: describe(await answer(v1.session.todo({ path: { id: MISSING } }))),
  todoV2: describe(await answer(v2.session.todo({ sessionID: MISSING }))),
  getV2: describe(await answer(v2.session.get({ sessionID: MISSING }))),
  deleteV1: describe(await answer(v1.session.delete({ path: { id: MISSING } }))),
};

// A late subscriber sees no replay of what happened before it connected (the sidecar's catch-up
// window, which the harness sets shorter than this pause, is over).
await new Promise((resolve) => setTimeout(resolve, 1000));
const lateController = new AbortController();
const late = collect((await v2.event.subscribe({}, { signal: lateController.signal, sseMaxRetryAttempts: 1 })).stream);
await late.until((events) => events.length > 0);
await new Promise((resolve) => setTimeout(resolve, 1500));
lateController.abort();
report.lateSubscriber = eventsOf(late.events, [a, b]).order;

// Deleting a session: `true`, then its todo route is NotFound.
const deleted = await answer(v2.session.delete({ sessionID: b }));
report.delete = { v2: describe(deleted), v2Data: deleted.data, todoAfter: describe(await answer(v2.session.todo({ sessionID: b }))) };

// Every stream saw both sessions' lifecycle and a's list.
const sawAll = (events) =>
  events.some((e) => e?.type === "todo.updated" && e.properties.sessionID === a) &&
  events.some((e) => e?.type === "session.updated" && e.properties.info.title === "renamed") &&
  events.some((e) => e?.type === "session.deleted" && e.properties.sessionID === b);
await Promise.all([onV1, onV2, onGlobal].map((on) => on.until(sawAll, EVENTS_MS)));
const lastTodos = (events) => events.filter((e) => e?.type === "todo.updated" && e.properties.sessionID === a).at(-1);
report.events = {
  v1: eventsOf(onV1.events, [a, b]),
  v2: eventsOf(onV2.events, [a, b]),
  global: eventsOf(onGlobal.events, [a, b], (event) => event.payload),
  globalSync: syncsOf(onGlobal.events, [a, b]),
  globalEnvelopes: [
    ...new Set(
      onGlobal.events
        .filter((event) => WATCHED_TYPES.has(event.payload?.type) && event.payload.type !== "server.connected")
        .filter((event) => [a, b].includes(event.payload.properties.sessionID))
        .map((event) => JSON.stringify(shape({ ...event, payload: null }))),
    ),
  ],
  globalDirectoryIsTheClients: [
    ...new Set(onGlobal.events.filter((e) => e.payload?.properties?.sessionID === a).map((e) => e.directory === directory)),
  ],
  lastTodosValues: project(lastTodos(onV2.events)?.properties.todos ?? []),
};
for (const controller of controllers) controller.abort();
console.log(JSON.stringify({ report }));
process.exit(0);
