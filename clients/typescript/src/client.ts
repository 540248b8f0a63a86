/**
 * The typed client of `sessiontodo.v1.TodoService`.
 *
 * The transport is injected (`new TodoClient(transport)`) or made by `TodoClient.connect`. Calls
 * whose repetition is harmless are retried while the service is UNAVAILABLE, by the client's
 * `RetryPolicy` (full jitter, attempts, a deadline), as the Python client does: `addTodo` sends a
 * request id so that its retry can never add twice (as `claimTodo` does, so that its retry never
 * claims a second todo), and `createSession` generates the id when
 * given none, so that its retry can never create two sessions. Updates are retried too: setting
 * the same values again changes nothing, and one with an `expectedRevision` applies only while
 * nothing was written since, so a repeat never writes twice or over another client's change (if
 * the first try was applied and only its reply lost, the repeat throws `Aborted`, which a
 * read-modify-write handles as any conflict). `batchWrite` sends a request id (generated once
 * when given none), so that its retry returns the first call's results and never writes twice.
 * `replaceTodos`, `removeTodo` and `releaseTodo` are not retried (UNAVAILABLE may come after the
 * write was applied): they throw `Unavailable` for the caller to decide. `watch` and `watchChanges`
 * reconnect on their own and resume after the last revision (cursor) they delivered, so their
 * consumer sees every change exactly once, in order, or a RESET where history was lost.
 */

import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import { create } from "@bufbuild/protobuf";
import { createClient, type CallOptions, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import {
  addTodoRequest,
  claimFromProto,
  claimTodoRequest,
  createSessionRequest,
  feedEventFromProto,
  isKnownKind,
  releaseTodoRequest,
  removeTodoRequest,
  renewClaimRequest,
  replaceTodosRequest,
  sessionFromProto,
  todoFromProto,
  updateSessionRequest,
  updateTodoRequest,
  watchEventFromProto,
  writeResultFromProto,
  writeToProto,
} from "./convert.js";
import { serviceError } from "./errors.js";
import { FeedPosition } from "./feed.js";
import * as pb from "./gen/sessiontodo/v1/todo_service_pb.js";
import type {
  AddedTodo,
  Claim,
  FeedEvent,
  NewTodo,
  Session,
  SessionTodos,
  TodoList,
  TodoPriority,
  TodoStatus,
  UpdatedTodo,
  WatchEvent,
  Write,
  WriteResults,
} from "./models.js";
import { ConnectionReadiness, NotReady } from "./readiness.js";
import { DEFAULT_RETRY, isTransient, type RetryPolicy } from "./retry.js";
import { authority, ChannelSecurity } from "./security.js";

/** The most writes one `batchWrite` takes (`BatchWriteRequest.writes`: 1 to 1000); the server refuses more. */
export const MAX_BATCH_WRITES = 1000;

/** How often a connection with open calls is pinged: well above the 10 s sessiontodo servers accept. */
export const KEEPALIVE_INTERVAL_MS = 30_000;

export interface ClientOptions {
  /** Default: 5 tries, 100 ms doubling to 2 s, within 30 s. */
  readonly retry?: RetryPolicy;
  /** Deadline of each unary call (never of a watch). Default 10 s. */
  readonly timeoutMs?: number;
}

export interface ConnectOptions extends ClientOptions {
  /** TLS, client certificate and bearer token; default: plaintext, anonymous. */
  readonly security?: ChannelSecurity;
  /**
   * Told once per outage that calls wait for the server to accept connections (each within its
   * timeout); default: one line on stderr (`console.warn`).
   */
  readonly onWaiting?: (line: string) => void;
  /** Ping interval of a connection with open calls (sessiontodo servers refuse pings under 10 s apart). */
  readonly keepaliveMs?: number;
}

export interface Origin {
  /** Who is writing, echoed on the watch and feed messages the write causes. */
  readonly origin?: string;
}

export interface CreateSessionOptions extends Origin {
  readonly sessionId?: string;
  readonly parentId?: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** Milliseconds without a change before the session expires (at least 1000); default: the server's. */
  readonly idleTtlMs?: number;
}

export interface UpdateSessionOptions extends Origin {
  readonly labels?: Readonly<Record<string, string>>;
  readonly removeLabels?: readonly string[];
  /** The new idle TTL; 0 removes it (never expire). */
  readonly idleTtlMs?: number;
  /** Write only at this revision: a retried update then never overwrites another client's change. */
  readonly expectedRevision?: bigint;
}

export interface ListSessionsOptions {
  readonly parentId?: string;
  readonly labels?: Readonly<Record<string, string>>;
}

export interface WriteOptions extends Origin {
  readonly expectedRevision?: bigint;
}

export interface AddTodoOptions extends WriteOptions {
  /** Where to insert: 0 or negative is the front; none, or past the end, appends. */
  readonly index?: number;
  /** Makes retries safe; generated when not given. Reusing one for another request is FAILED_PRECONDITION. */
  readonly requestId?: string;
}

export interface BatchWriteOptions extends Origin {
  /** Makes retries safe; generated when not given. Reusing one for another batch is FAILED_PRECONDITION. */
  readonly requestId?: string;
}

export interface UpdateTodoOptions extends WriteOptions {
  readonly content?: string;
  readonly status?: TodoStatus | number;
  readonly priority?: TodoPriority | number;
  readonly metadata?: Readonly<Record<string, string>>;
  readonly removeMetadata?: readonly string[];
}

export interface GetTodosOptions {
  /** Only the todos free to take: pending, unowned, every blocker completed or cancelled. */
  readonly ready?: boolean;
  /** Only this owner's todos ("" only unowned ones). */
  readonly owner?: string;
}

export interface OwnerOptions extends WriteOptions {
  /** Who claims (holds) the todo: 1 to 128 characters naming an agent, a session or a person. */
  readonly owner: string;
}

export interface RenewClaimOptions extends OwnerOptions {
  /** The lease's new duration from now, in milliseconds; default: the claim's own. */
  readonly leaseMs?: number;
}

export interface ClaimTodoOptions extends OwnerOptions {
  /** The todo to claim; default: the first ready one in list order. */
  readonly todoId?: string;
  /** The claim lapses unless renewed within this many milliseconds (1 s to 1 day). */
  readonly leaseMs?: number;
  /** Makes retries safe; generated when not given. Reusing one for another request is FAILED_PRECONDITION. */
  readonly requestId?: string;
}

export interface WatchOptions {
  /** Resume after this revision instead of starting with a snapshot. */
  readonly afterRevision?: bigint;
  /** Also deliver PROGRESS messages (the stream is alive, nothing changed). */
  readonly includeProgress?: boolean;
}

export interface WatchChangesOptions {
  /** Resume after this cursor (from an earlier event). */
  readonly afterCursor?: string;
  /** Start with a snapshot of every matching session, ended by a PROGRESS bookmark. */
  readonly includeSnapshot?: boolean;
  readonly sessionIds?: readonly string[];
  readonly parentId?: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** Also deliver PROGRESS messages (the snapshot's bookmark among them). */
  readonly includeProgress?: boolean;
}

/** The wire filter of a read, or undefined for the whole list. */
function todoFilter(options: GetTodosOptions): { ready: boolean; owner?: string } | undefined {
  if (!options.ready && options.owner === undefined) return undefined;
  return { ready: options.ready ?? false, owner: options.owner };
}

/** 32 random hex digits: the request ids this client generates, as the Python client makes them. */
function newRequestId(): string {
  return randomUUID().replaceAll("-", "");
}

/** A fresh session id: `ses_` and 32 hex digits, as the Python client makes them. */
export function newSessionId(): string {
  return `ses_${newRequestId()}`;
}

function bearer(token: string): Interceptor {
  return (next) => (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
}

/** What `connect` owns besides the transport: closing its connection, and waiting for it to open. */
export interface OwnedConnection {
  close(): void;
  /** Resolves once the connection is open, with what is left of `timeoutMs`; throws `Unavailable` if it does not open. */
  ready(timeoutMs: number): Promise<number>;
}

/** An injected transport's: the caller's to close, and to open. */
const INJECTED: OwnedConnection = { close: () => {}, ready: async (timeoutMs) => timeoutMs };

/** Transient, and not a wait for the connection that already took the call's whole timeout. */
function worthAnotherTry(error: unknown): boolean {
  return isTransient(error) && !(error instanceof NotReady);
}

/**
 * Every rpc of `TodoService` with typed arguments and results. On a client `connect` made, each
 * unary call first waits for the connection to open, within its timeout: a server that is starting
 * or restarting costs a wait, told once, not an error.
 */
export class TodoClient {
  private readonly rpc: Client<typeof pb.TodoService>;
  private readonly retry: RetryPolicy;
  private readonly timeoutMs: number;
  private readonly connection: OwnedConnection;

  constructor(transport: Transport, options: ClientOptions = {}, connection: OwnedConnection = INJECTED) {
    this.rpc = createClient(pb.TodoService, transport);
    this.retry = options.retry ?? DEFAULT_RETRY;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.connection = connection;
  }

  /**
   * A client on a new HTTP/2 connection to `target` (`host:port`); TLS, client certificate and
   * bearer token as `security` says. Throws for a token in plaintext to anything but a loopback
   * address. Nothing connects until the first call.
   *
   * The connection is pinged every `keepaliveMs` while calls are open (a watch learns of a dead
   * connection), and before it is used again after that long idle. Idle connections are not
   * pinged on a timer: connect-node 2.1 re-arms that timer when the streams of a closed connection
   * end, then pings the destroyed session, an uncaught exception that ends the process
   * (connectrpc/connect-es#1795).
   */
  static connect(target: string, options: ConnectOptions = {}): TodoClient {
    const security = options.security ?? new ChannelSecurity();
    security.check(target);
    const baseUrl = `${security.tls ? "https" : "http"}://${authority(target)}`;
    const tls = security.tls
      ? { ca: security.rootCertificates, cert: security.clientCertificate, key: security.clientKey }
      : {};
    const sessionManager = new Http2SessionManager(
      baseUrl,
      { pingIntervalMs: options.keepaliveMs ?? KEEPALIVE_INTERVAL_MS, pingIdleConnection: false },
      tls,
    );
    const interceptors = security.token === undefined ? [] : [bearer(security.token)];
    const transport = createGrpcTransport({ baseUrl, sessionManager, interceptors });
    const readiness = new ConnectionReadiness(
      sessionManager,
      `sessiontodo at ${target}`,
      options.onWaiting ?? ((line) => console.warn(line)),
    );
    return new TodoClient(transport, options, {
      close: () => sessionManager.abort(),
      ready: (timeoutMs) => readiness.ready(timeoutMs),
    });
  }

  /** Closes the connection `connect` made (an injected transport is the caller's to close). */
  close(): void {
    this.connection.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * One unary call, once the connection is open (within the call's timeout); retried while
   * UNAVAILABLE when `retry`: only for calls whose repetition is harmless.
   */
  private async call<T>(invoke: (options: CallOptions) => Promise<T>, retry = true): Promise<T> {
    const once = async () => {
      const timeoutMs = await this.connection.ready(this.timeoutMs);
      try {
        return await invoke({ timeoutMs });
      } catch (error) {
        throw serviceError(error);
      }
    };
    return retry ? this.retry.run(once, { retryIf: worthAnotherTry }) : once();
  }

  /**
   * Get or create; without `sessionId` a fresh id is generated here, once, so that a retried
   * call still creates exactly one session. Returns the session and whether this call created it.
   */
  async createSession(options: CreateSessionOptions = {}): Promise<{ session: Session; created: boolean }> {
    const request = createSessionRequest({
      ...options,
      kind: "create_session",
      sessionId: options.sessionId || newSessionId(),
    });
    request.origin = options.origin ?? "";
    const response = await this.call((call) => this.rpc.createSession(request, call));
    return { session: sessionFromProto(response.session!), created: response.created };
  }

  async getSession(sessionId: string): Promise<Session> {
    const response = await this.call((call) => this.rpc.getSession({ sessionId }, call));
    return sessionFromProto(response.session!);
  }

  /**
   * Sets and removes labels and/or changes the idle TTL; returns the session and whether anything
   * changed. Retried while UNAVAILABLE (see the module comment), with or without `expectedRevision`.
   */
  async updateSession(
    sessionId: string,
    options: UpdateSessionOptions,
  ): Promise<{ session: Session; changed: boolean }> {
    const request = updateSessionRequest({ ...options, kind: "update_session", sessionId });
    request.origin = options.origin ?? "";
    const response = await this.call((call) => this.rpc.updateSession(request, call));
    return { session: sessionFromProto(response.session!), changed: response.changed };
  }

  /** Removes a session and its descendants; returns their ids (empty if it did not exist). */
  async removeSession(sessionId: string, options: Origin = {}): Promise<string[]> {
    const request = { sessionId, origin: options.origin ?? "" };
    const response = await this.call((call) => this.rpc.removeSession(request, call));
    return response.removedSessionIds;
  }

  /** Removes every session but the global list; returns how many were removed. */
  async removeAllSessions(options: Origin = {}): Promise<number> {
    const response = await this.call((call) => this.rpc.removeAllSessions({ origin: options.origin ?? "" }, call));
    return response.removedCount;
  }

  /** Every session (or the children of `parentId`, those carrying `labels`), following pages. */
  async listSessions(options: ListSessionsOptions = {}): Promise<Session[]> {
    const sessions: Session[] = [];
    let pageToken = "";
    do {
      const request = { pageToken, parentId: options.parentId ?? "", labels: { ...options.labels } };
      const response = await this.call((call) => this.rpc.listSessions(request, call));
      sessions.push(...response.sessions.map(sessionFromProto));
      pageToken = response.nextPageToken;
    } while (pageToken !== "");
    return sessions;
  }

  /** The session's list at its revision; `ready` and `owner` select todos (see `GetTodosOptions`). */
  async getTodos(sessionId: string, options: GetTodosOptions = {}): Promise<TodoList> {
    const filter = todoFilter(options);
    const response = await this.call((call) => this.rpc.getTodos({ sessionId, filter }, call));
    return { todos: response.todos.map(todoFromProto), revision: response.revision };
  }

  /** The lists of the sessions that exist, in request order, and the ids that name none. */
  async batchGetTodos(
    sessionIds: readonly string[],
    options: GetTodosOptions = {},
  ): Promise<{ sessions: SessionTodos[]; missingSessionIds: string[] }> {
    const request = { sessionIds: [...sessionIds], filter: todoFilter(options) };
    const response = await this.call((call) => this.rpc.batchGetTodos(request, call));
    return {
      sessions: response.sessions.map((entry) => ({
        session: sessionFromProto(entry.session!),
        todos: entry.todos.map(todoFromProto),
      })),
      missingSessionIds: response.missingSessionIds,
    };
  }

  /** Replaces the whole list; keeps given ids, generates the rest. Not retried (see the module comment). */
  async replaceTodos(sessionId: string, todos: readonly NewTodo[], options: WriteOptions = {}): Promise<TodoList> {
    const request = replaceTodosRequest({ ...options, kind: "replace_todos", sessionId, todos });
    request.origin = options.origin ?? "";
    const response = await this.call((call) => this.rpc.replaceTodos(request, call), false);
    return { todos: response.todos.map(todoFromProto), revision: response.revision };
  }

  /** Appends or inserts one todo; retried with the same request id, so it is added once. */
  async addTodo(sessionId: string, todo: NewTodo, options: AddTodoOptions = {}): Promise<AddedTodo> {
    const request = addTodoRequest({ ...options, kind: "add_todo", sessionId, todo });
    request.requestId = options.requestId || newRequestId();
    request.origin = options.origin ?? "";
    const response = await this.call((call) => this.rpc.addTodo(request, call));
    return { todo: todoFromProto(response.todo!), index: response.index, revision: response.revision };
  }

  /**
   * Changes the given fields of one todo; a change to nothing keeps the revision (`changed: false`).
   * Retried while UNAVAILABLE (see the module comment), with or without `expectedRevision`.
   */
  async updateTodo(sessionId: string, todoId: string, options: UpdateTodoOptions): Promise<UpdatedTodo> {
    const request = updateTodoRequest({ ...options, kind: "update_todo", sessionId, todoId });
    request.origin = options.origin ?? "";
    const response = await this.call((call) => this.rpc.updateTodo(request, call));
    return { todo: todoFromProto(response.todo!), revision: response.revision, changed: response.changed };
  }

  /**
   * Gives `todoId` — or, without it, the first ready todo — to `owner`, in progress, atomically.
   * Nothing ready is an answer (`todo` undefined); a named todo that cannot be taken throws
   * `ClaimRefused` saying why. Retried while UNAVAILABLE under one request id (generated once
   * unless given), so a retry returns the first claim and never claims a second todo.
   */
  async claimTodo(sessionId: string, options: ClaimTodoOptions): Promise<Claim> {
    const request = claimTodoRequest({ ...options, kind: "claim_todo", sessionId });
    request.requestId = options.requestId || newRequestId();
    request.origin = options.origin ?? "";
    return claimFromProto(await this.call((call) => this.rpc.claimTodo(request, call)));
  }

  /**
   * Pushes a claim's lease back (by `leaseMs` from now, else its own duration); throws
   * `ClaimRefused` (`CLAIM_NOT_HELD`) once the claim is not `owner`'s. Retried: renewing again only renews.
   */
  async renewClaim(sessionId: string, todoId: string, options: RenewClaimOptions): Promise<Claim> {
    const request = renewClaimRequest({ ...options, kind: "renew_claim", sessionId, todoId });
    request.origin = options.origin ?? "";
    return claimFromProto(await this.call((call) => this.rpc.renewClaim(request, call)));
  }

  /**
   * Gives a claimed todo back (pending, unowned, no lease); throws `ClaimRefused` (`CLAIM_NOT_HELD`)
   * when `owner` does not hold it. Not retried: the repeat of a release that happened would be refused.
   */
  async releaseTodo(sessionId: string, todoId: string, options: OwnerOptions): Promise<UpdatedTodo> {
    const request = releaseTodoRequest({ ...options, kind: "release_todo", sessionId, todoId });
    request.origin = options.origin ?? "";
    const response = await this.call((call) => this.rpc.releaseTodo(request, call), false);
    return { todo: todoFromProto(response.todo!), revision: response.revision, changed: true };
  }

  /** Removes one todo; returns the revision after. Not retried: a repeat of a removal that happened is NOT_FOUND. */
  async removeTodo(sessionId: string, todoId: string, options: WriteOptions = {}): Promise<bigint> {
    const request = removeTodoRequest({ ...options, kind: "remove_todo", sessionId, todoId });
    request.origin = options.origin ?? "";
    const response = await this.call((call) => this.rpc.removeTodo(request, call), false);
    return response.revision;
  }

  /**
   * Up to `MAX_BATCH_WRITES` writes, to any sessions, applied in order and atomically (all or
   * none): one call instead of one per write. Returns one result per write, in order, typed by
   * its write's `kind` (for an array literal of writes, each element's own type). A failing write
   * fails the batch with its rpc's error, naming it: `error.writeIndex`, a message starting with
   * `writes[i]`, field paths such as `writes[i].add_todo.todo.content`. Retried while UNAVAILABLE
   * under one request id (generated once unless given), so a retry returns the first call's
   * results and never writes twice.
   */
  async batchWrite<const Writes extends readonly Write[]>(
    writes: Writes,
    options: BatchWriteOptions = {},
  ): Promise<WriteResults<Writes>> {
    const request = create(pb.BatchWriteRequestSchema, {
      writes: writes.map(writeToProto),
      requestId: options.requestId || newRequestId(),
      origin: options.origin ?? "",
    });
    const response = await this.call((call) => this.rpc.batchWrite(request, call));
    if (response.results.length !== writes.length) {
      throw new Error(`BatchWrite answered ${response.results.length} results for ${writes.length} writes`);
    }
    const results = response.results.map((result, index) => writeResultFromProto(writes[index].kind, result));
    return results as WriteResults<Writes>;
  }

  /**
   * Every change of one session, across reconnects, until the session is removed.
   *
   * While the service is UNAVAILABLE it reconnects for ever (with capped backoff) and resumes
   * after the last revision it yielded. Ends after yielding `session_removed`; throws the
   * `ServiceError` of any other failure (`NotFound` for an unknown session). Breaking out of the
   * loop cancels the call.
   */
  async *watch(sessionId: string, options: WatchOptions = {}): AsyncGenerator<WatchEvent, void, undefined> {
    let afterRevision = options.afterRevision;
    for (let attempt = 0; ; attempt += 1) {
      const abort = new AbortController();
      try {
        const stream = this.rpc.watchTodos({ sessionId, afterRevision }, { signal: abort.signal });
        for await (const message of stream) {
          attempt = 0;
          if (!isKnownKind(message.kind)) continue;
          const event = watchEventFromProto(message);
          if (event.kind !== "progress") afterRevision = event.revision;
          else if (!options.includeProgress) continue;
          yield event;
          if (event.kind === "session_removed") return;
        }
        return;
      } catch (error) {
        const failure = serviceError(error);
        if (!isTransient(failure)) throw failure;
      } finally {
        abort.abort();
      }
      await sleep(this.retry.delay(attempt));
    }
  }

  /**
   * The server-wide feed (`WatchChanges`), across reconnects, for as long as it is read.
   *
   * While the service is UNAVAILABLE it reconnects for ever (with capped backoff) and resumes
   * after the last cursor it received. A snapshot cut short by a disconnect is started again,
   * announced by a RESET with an empty session id, as the server would. PROGRESS messages (the
   * end-of-snapshot bookmark among them) are yielded only with `includeProgress`. Breaking out
   * of the loop cancels the call.
   */
  async *watchChanges(options: WatchChangesOptions = {}): AsyncGenerator<FeedEvent, void, undefined> {
    const filter = {
      sessionIds: [...(options.sessionIds ?? [])],
      parentId: options.parentId ?? "",
      labels: { ...options.labels },
    };
    const position = new FeedPosition(options.afterCursor ?? "", options.includeSnapshot ?? false);
    for (let attempt = 0; ; attempt += 1) {
      const abort = new AbortController();
      let reset: FeedEvent | undefined;
      try {
        const request = { afterCursor: position.cursor, includeSnapshot: position.snapshot, filter };
        for await (const message of this.rpc.watchChanges(request, { signal: abort.signal })) {
          attempt = 0;
          if (!isKnownKind(message.kind)) {
            position.skipped(message.cursor);
            continue;
          }
          const event = feedEventFromProto(message);
          position.delivered(event.kind, event.cursor);
          if (event.kind !== "progress" || options.includeProgress) yield event;
        }
        return;
      } catch (error) {
        const failure = serviceError(error);
        if (!isTransient(failure)) throw failure;
        reset = position.interrupted();
      } finally {
        abort.abort();
      }
      if (reset !== undefined) yield reset;
      await sleep(this.retry.delay(attempt));
    }
  }
}
