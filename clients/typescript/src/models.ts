/**
 * Typed values of the sessiontodo API, independent of protobuf: plain objects with the wire's
 * names in camelCase, enum values as lower-case words, revisions as `bigint` (they are uint64).
 */

/** Where a todo stands. */
export type TodoStatus = "pending" | "in_progress" | "completed" | "cancelled";

/** How important a todo is. */
export type TodoPriority = "high" | "medium" | "low";

/** What a watch or feed message reports. */
export type ChangeKind =
  | "snapshot"
  | "reset"
  | "todos_replaced"
  | "todo_added"
  | "todo_updated"
  | "todo_removed"
  | "session_removed"
  | "progress"
  | "session_created"
  | "session_updated";

/** Why a session was removed. */
export type RemovalReason = "removed" | "expired";

/**
 * One todo as stored.
 *
 * A status or priority that a newer server added, and this client has no name for, is read as
 * its wire number rather than failing the read or watch: it is kept, and written back unchanged,
 * so a read-modify-write never loses it.
 */
export interface Todo {
  readonly id: string;
  readonly content: string;
  readonly status: TodoStatus | number;
  readonly priority: TodoPriority | number;
  /** Free-form entries stored and returned untouched. */
  readonly metadata: Readonly<Record<string, string>>;
}

/** A todo to write: leave `id` out to have one generated; status defaults to pending, priority to medium. */
export interface NewTodo {
  readonly id?: string;
  readonly content: string;
  readonly status?: TodoStatus | number;
  readonly priority?: TodoPriority | number;
  readonly metadata?: Readonly<Record<string, string>>;
}

export interface Session {
  readonly sessionId: string;
  /** The session this one was created under, or "". */
  readonly parentId: string;
  readonly revision: bigint;
  readonly todoCount: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly createdAt?: Date;
  readonly updatedAt?: Date;
  /** Milliseconds without a change before the session expires; undefined: never. */
  readonly idleTtlMs?: number;
}

/** A session's todos at one revision. */
export interface TodoList {
  readonly todos: readonly Todo[];
  readonly revision: bigint;
}

/** A session with its list (BatchGetTodos). */
export interface SessionTodos {
  readonly session: Session;
  readonly todos: readonly Todo[];
}

export interface AddedTodo {
  readonly todo: Todo;
  readonly index: number;
  readonly revision: bigint;
}

export interface UpdatedTodo {
  readonly todo: Todo;
  readonly revision: bigint;
  readonly changed: boolean;
}

/** One message of a watch: the change and the full list after it. */
export interface WatchEvent {
  readonly sessionId: string;
  readonly kind: ChangeKind;
  readonly revision: bigint;
  /** The todo the change is about (added, updated, removed), or "". */
  readonly todoId: string;
  readonly todos: readonly Todo[];
  /** Who made the change (the `origin` its write gave). */
  readonly origin: string;
  readonly removalReason?: RemovalReason;
  /** The session's metadata after the change; undefined on PROGRESS and on the feed's RESET marker. */
  readonly session?: Session;
}

/** One message of the server-wide feed: a watch message plus its cursor ("" on SNAPSHOT and RESET). */
export interface FeedEvent extends WatchEvent {
  readonly cursor: string;
}
