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
  /** The long text of what is to be done; `content` stays the short subject. */
  readonly description: string;
  /** What is shown while it is in progress, in the present tense ("Writing the parser"). */
  readonly activeForm: string;
  /** Who works on it (an agent, a session, a person); "" for nobody. */
  readonly owner: string;
  /** Ids of todos of the same list that must be completed (or cancelled) before this one is ready. */
  readonly blockedBy: readonly string[];
  /** The todos whose `blockedBy` names this one: derived by the server. */
  readonly blocks: readonly string[];
  /** When the owner's claim lapses unless renewed; undefined without a lease. */
  readonly leaseExpiresAt?: Date;
  /** Milliseconds a lease runs from each renewal; undefined without a lease. */
  readonly leaseDurationMs?: number;
}

/** A todo to write: leave `id` out to have one generated; status defaults to pending, priority to medium. */
export interface NewTodo {
  readonly id?: string;
  readonly content: string;
  readonly status?: TodoStatus | number;
  readonly priority?: TodoPriority | number;
  readonly metadata?: Readonly<Record<string, string>>;
  readonly description?: string;
  readonly activeForm?: string;
  readonly owner?: string;
  readonly blockedBy?: readonly string[];
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

/** What `claimTodo` (or `renewClaim`) got: the todo, now the owner's and in progress. */
export interface Claim {
  /** Undefined when no todo was named and none is ready: "nothing ready" is an answer, not an error. */
  readonly todo?: Todo;
  readonly revision: bigint;
  /** False for nothing ready, a todo that already was the owner's (no new lease), and a retried request. */
  readonly changed: boolean;
}

/**
 * One write of a batch (`TodoClient.batchWrite`): a write rpc's arguments and a `kind` saying
 * which. The kind is the operation's name on the wire, so an error's field path names it too
 * (`writes[2].add_todo.todo.content`). Origin and request id belong to the batch, not to a write.
 */
export type Write =
  | ReplaceTodosWrite
  | AddTodoWrite
  | UpdateTodoWrite
  | RemoveTodoWrite
  | ClaimTodoWrite
  | RenewClaimWrite
  | ReleaseTodoWrite
  | CreateSessionWrite
  | UpdateSessionWrite
  | RemoveSessionWrite;

/** Replace a session's list (as `replaceTodos`). */
export interface ReplaceTodosWrite {
  readonly kind: "replace_todos";
  readonly sessionId: string;
  readonly todos: readonly NewTodo[];
  readonly expectedRevision?: bigint;
}

/** Add one todo (as `addTodo`): at `index` (0 or negative: the front), or appended. */
export interface AddTodoWrite {
  readonly kind: "add_todo";
  readonly sessionId: string;
  readonly todo: NewTodo;
  readonly index?: number;
  readonly expectedRevision?: bigint;
}

/** Change one todo's given fields (as `updateTodo`). */
export interface UpdateTodoWrite {
  readonly kind: "update_todo";
  readonly sessionId: string;
  readonly todoId: string;
  readonly content?: string;
  readonly status?: TodoStatus | number;
  readonly priority?: TodoPriority | number;
  readonly metadata?: Readonly<Record<string, string>>;
  readonly removeMetadata?: readonly string[];
  readonly description?: string;
  readonly activeForm?: string;
  /** The new owner; "" clears it. */
  readonly owner?: string;
  /** Todos of the same list it is to wait for. */
  readonly addBlockedBy?: readonly string[];
  readonly removeBlockedBy?: readonly string[];
  readonly expectedRevision?: bigint;
}

/** Remove one todo (as `removeTodo`). */
export interface RemoveTodoWrite {
  readonly kind: "remove_todo";
  readonly sessionId: string;
  readonly todoId: string;
  readonly expectedRevision?: bigint;
}

/** Claim a todo, or the first ready one (as `claimTodo`). */
export interface ClaimTodoWrite {
  readonly kind: "claim_todo";
  readonly sessionId: string;
  readonly owner: string;
  /** The todo to claim; default: the first ready one. */
  readonly todoId?: string;
  /** The claim lapses unless renewed within this many milliseconds (1 s to 1 day). */
  readonly leaseMs?: number;
  readonly expectedRevision?: bigint;
}

/** Renew a claim's lease (as `renewClaim`). */
export interface RenewClaimWrite {
  readonly kind: "renew_claim";
  readonly sessionId: string;
  readonly todoId: string;
  readonly owner: string;
  /** The lease's new duration from now; default: the claim's own. */
  readonly leaseMs?: number;
  readonly expectedRevision?: bigint;
}

/** Give a claimed todo back (as `releaseTodo`). */
export interface ReleaseTodoWrite {
  readonly kind: "release_todo";
  readonly sessionId: string;
  readonly todoId: string;
  readonly owner: string;
  readonly expectedRevision?: bigint;
}

/** Create a session, or find it (as `createSession`; here the id is the caller's). */
export interface CreateSessionWrite {
  readonly kind: "create_session";
  readonly sessionId: string;
  readonly parentId?: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** Milliseconds without a change before the session expires (at least 1000); default: the server's. */
  readonly idleTtlMs?: number;
}

/** Change a session's labels or idle TTL (as `updateSession`). */
export interface UpdateSessionWrite {
  readonly kind: "update_session";
  readonly sessionId: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly removeLabels?: readonly string[];
  /** The new idle TTL; 0 removes it (never expire). */
  readonly idleTtlMs?: number;
  readonly expectedRevision?: bigint;
}

/** Remove a session and its descendants (as `removeSession`). */
export interface RemoveSessionWrite {
  readonly kind: "remove_session";
  readonly sessionId: string;
}

/** What every write of a batch did to its session. */
interface WriteOutcome {
  /** The session's revision after the write (a removal: its SESSION_REMOVED's; 0 when nothing was removed). */
  readonly revision: bigint;
  /** False for a list or an update equal to what was there, a session that existed, a removal of none. */
  readonly changed: boolean;
}

/** One write's result, of the write's `kind` (`WriteResultOf` picks it for a given write type). */
export type WriteResult =
  | ReplaceTodosResult
  | AddTodoResult
  | UpdateTodoResult
  | RemoveTodoResult
  | ClaimTodoResult
  | RenewClaimResult
  | ReleaseTodoResult
  | CreateSessionResult
  | UpdateSessionResult
  | RemoveSessionResult;

export interface ReplaceTodosResult extends WriteOutcome {
  readonly kind: "replace_todos";
  /** The list's ids as stored, in order (generated ones filled in). */
  readonly todoIds: readonly string[];
}

export interface AddTodoResult extends AddedTodo, WriteOutcome {
  readonly kind: "add_todo";
}

export interface UpdateTodoResult extends UpdatedTodo {
  readonly kind: "update_todo";
}

export interface RemoveTodoResult extends WriteOutcome {
  readonly kind: "remove_todo";
}

export interface ClaimTodoResult extends Claim {
  readonly kind: "claim_todo";
}

export interface RenewClaimResult extends UpdatedTodo {
  readonly kind: "renew_claim";
}

export interface ReleaseTodoResult extends UpdatedTodo {
  readonly kind: "release_todo";
}

/** `changed` says whether the write created the session. */
export interface CreateSessionResult extends WriteOutcome {
  readonly kind: "create_session";
}

export interface UpdateSessionResult extends WriteOutcome {
  readonly kind: "update_session";
}

export interface RemoveSessionResult extends WriteOutcome {
  readonly kind: "remove_session";
  /** The session and its descendants. */
  readonly removedSessionIds: readonly string[];
}

/** The result type of a write type: `AddTodoResult` for an `AddTodoWrite`; a union for a union. */
export type WriteResultOf<W> = W extends { readonly kind: infer Kind } ? Extract<WriteResult, { kind: Kind }> : never;

/** The results of a batch: one per write, in order, each typed by its write (a tuple for a tuple of writes). */
export type WriteResults<Writes extends readonly Write[]> = { -readonly [I in keyof Writes]: WriteResultOf<Writes[I]> };

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
