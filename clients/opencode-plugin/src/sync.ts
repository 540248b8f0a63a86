/**
 * Keeps sessiontodo in step with one OpenCode instance's sessions, from the events it is told.
 *
 * Events only record what is due, per session: the latest labels, the latest full list, or the
 * removal. One worker applies what is due, a session at a time, in the order the sessions
 * changed. Because a list always travels whole, a session's newer list replaces one that is still
 * due, so an outage of sessiontodo costs memory for one list per session at most, and when
 * sessiontodo is back the latest of every list is stored: while it is UNAVAILABLE the worker
 * retries with the client's backoff, for ever. What sessiontodo refuses (an invalid list) is
 * logged and dropped: trying again cannot help.
 */

import { setTimeout as sleep } from "node:timers/promises";

import { FailedPrecondition, isTransient, NotFound, RetryPolicy, type TodoClient } from "@sessiontodo/client";

import { sessionLabels, todoToService, type OpenCodeSession, type OpenCodeTodo } from "./translate.js";

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface SyncOptions {
  /** The origin every write carries. */
  readonly origin: string;
  /** OpenCode's session, for one whose creation this process did not see; undefined if OpenCode has none. */
  readonly lookup: (sessionId: string) => Promise<OpenCodeSession | undefined>;
  readonly log: (level: LogLevel, message: string) => void;
  /** Delays between tries while sessiontodo is unavailable. */
  readonly retry?: RetryPolicy;
}

/** What is due for one session. */
interface Due {
  readonly session?: OpenCodeSession;
  readonly todos?: readonly OpenCodeTodo[];
  readonly removed?: boolean;
}

/** Later news over earlier: a removal replaces everything, anything after a removal starts afresh. */
function merged(earlier: Due | undefined, later: Due): Due {
  return earlier === undefined || earlier.removed || later.removed ? later : { ...earlier, ...later };
}

function labelsKey(labels: Readonly<Record<string, string>>): string {
  return JSON.stringify(labels);
}

export class SessionSync {
  private readonly due = new Map<string, Due>();
  /** Sessions this process made sure exist in sessiontodo, with the labels it stored. */
  private readonly stored = new Map<string, string>();
  /** The list last written per session, so an unchanged list is not written again. */
  private readonly written = new Map<string, string>();
  private readonly retry: RetryPolicy;
  private readonly stopping = new AbortController();
  private wake: (() => void) | undefined;
  private readonly worker: Promise<void>;

  constructor(
    private readonly client: TodoClient,
    private readonly options: SyncOptions,
  ) {
    this.retry = options.retry ?? new RetryPolicy({ initialMs: 100, maximumMs: 5000 });
    this.worker = this.work();
  }

  /** `session.created` / `session.updated`: its labels are due. */
  sessionChanged(session: OpenCodeSession): void {
    this.record(session.id, { session });
  }

  /** `todo.updated`: its full list is due. */
  todosUpdated(sessionId: string, todos: readonly OpenCodeTodo[]): void {
    this.record(sessionId, { todos });
  }

  /** `session.deleted`: its removal is due (with its descendants, as OpenCode removes them). */
  sessionDeleted(sessionId: string): void {
    this.record(sessionId, { removed: true });
  }

  /** Stops the worker; what is still due is given up. */
  async close(): Promise<void> {
    this.stopping.abort();
    this.wake?.();
    await this.worker;
  }

  private record(sessionId: string, news: Due): void {
    this.due.set(sessionId, merged(this.due.get(sessionId), news));
    this.wake?.();
  }

  private async work(): Promise<void> {
    let failures = 0;
    while (!this.stopping.signal.aborted) {
      const next = this.due.entries().next();
      if (next.done) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      const [sessionId, due] = next.value;
      this.due.delete(sessionId);
      try {
        await this.apply(sessionId, due);
        if (failures > 0) this.options.log("info", `sessiontodo is reachable again`);
        failures = 0;
      } catch (error) {
        if (!isTransient(error)) {
          this.options.log("error", `sessiontodo refused session ${sessionId}'s update, dropped: ${error}`);
          continue;
        }
        this.due.set(sessionId, merged(due, this.due.get(sessionId) ?? {}));
        if (failures === 0) this.options.log("warn", `sessiontodo is unavailable, retrying: ${error}`);
        await sleep(this.retry.delay(failures++), undefined, { signal: this.stopping.signal }).catch(() => {});
      }
    }
  }

  private async apply(sessionId: string, due: Due): Promise<void> {
    const origin = this.options.origin;
    if (due.removed) {
      await this.client.removeSession(sessionId, { origin });
      this.stored.delete(sessionId);
      this.written.delete(sessionId);
      return;
    }
    if (!this.stored.has(sessionId)) {
      await this.store(sessionId, due.session ?? (await this.options.lookup(sessionId)));
    } else if (due.session !== undefined && this.stored.get(sessionId) !== labelsKey(sessionLabels(due.session))) {
      await this.store(sessionId, due.session);
    }
    if (due.todos === undefined) return;
    try {
      await this.write(sessionId, due.todos);
    } catch (error) {
      if (!(error instanceof NotFound)) throw error;
      // Removed behind this process's back (an operator, an expiry): store it again.
      await this.store(sessionId, await this.options.lookup(sessionId));
      await this.write(sessionId, due.todos);
    }
  }

  /** Creates the session with its labels, or sets them on the existing one. */
  private async store(sessionId: string, session: OpenCodeSession | undefined): Promise<void> {
    const origin = this.options.origin;
    const labels = session === undefined ? {} : sessionLabels(session);
    const create = (parentId?: string) => this.client.createSession({ sessionId, parentId, labels, origin });
    const { session: existing, created } = await create(session?.parentID).catch((error: unknown) => {
      // The parent is not in sessiontodo, or the session sits under another one: keep it as a root.
      if (error instanceof NotFound || error instanceof FailedPrecondition) return create();
      throw error;
    });
    if (!created && Object.entries(labels).some(([key, value]) => existing.labels[key] !== value)) {
      await this.client.updateSession(sessionId, { labels, origin });
    }
    this.stored.set(sessionId, labelsKey(labels));
    this.written.delete(sessionId);
  }

  private async write(sessionId: string, todos: readonly OpenCodeTodo[]): Promise<void> {
    const key = JSON.stringify(todos.map(({ content, status, priority }) => [content, status, priority]));
    if (this.written.get(sessionId) === key) return;
    await this.client.replaceTodos(sessionId, todos.map(todoToService), { origin: this.options.origin });
    this.written.set(sessionId, key);
  }
}
