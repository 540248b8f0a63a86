/** Pure conversions between the typed values (models.ts) and the generated protobuf messages. */

import { create } from "@bufbuild/protobuf";
import { durationFromMs, durationMs, timestampDate, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";

import * as pb from "./gen/sessiontodo/v1/todo_service_pb.js";
import type {
  AddTodoWrite,
  ChangeKind,
  Claim,
  ClaimTodoWrite,
  CreateSessionWrite,
  FeedEvent,
  NewTodo,
  ReleaseTodoWrite,
  RemovalReason,
  RemoveTodoWrite,
  RenewClaimWrite,
  ReplaceTodosWrite,
  Session,
  Todo,
  TodoPriority,
  TodoStatus,
  UpdateSessionWrite,
  UpdateTodoWrite,
  WatchEvent,
  Write,
  WriteResult,
} from "./models.js";

const STATUSES: Record<TodoStatus, pb.TodoStatus> = {
  pending: pb.TodoStatus.PENDING,
  in_progress: pb.TodoStatus.IN_PROGRESS,
  completed: pb.TodoStatus.COMPLETED,
  cancelled: pb.TodoStatus.CANCELLED,
};
const PRIORITIES: Record<TodoPriority, pb.TodoPriority> = {
  high: pb.TodoPriority.HIGH,
  medium: pb.TodoPriority.MEDIUM,
  low: pb.TodoPriority.LOW,
};
const KINDS: Record<ChangeKind, pb.ChangeKind> = {
  snapshot: pb.ChangeKind.SNAPSHOT,
  reset: pb.ChangeKind.RESET,
  todos_replaced: pb.ChangeKind.TODOS_REPLACED,
  todo_added: pb.ChangeKind.TODO_ADDED,
  todo_updated: pb.ChangeKind.TODO_UPDATED,
  todo_removed: pb.ChangeKind.TODO_REMOVED,
  session_removed: pb.ChangeKind.SESSION_REMOVED,
  progress: pb.ChangeKind.PROGRESS,
  session_created: pb.ChangeKind.SESSION_CREATED,
  session_updated: pb.ChangeKind.SESSION_UPDATED,
};
const REASONS: Record<RemovalReason, pb.RemovalReason> = {
  removed: pb.RemovalReason.REMOVED,
  expired: pb.RemovalReason.EXPIRED,
};

function inverse<Name extends string>(table: Record<Name, number>): Map<number, Name> {
  return new Map(Object.entries(table).map(([name, number]) => [number as number, name as Name]));
}

const STATUS_NAMES = inverse(STATUSES);
const PRIORITY_NAMES = inverse(PRIORITIES);
const KIND_NAMES = inverse(KINDS);
const REASON_NAMES = inverse(REASONS);

/** A wire number for a name of `table`, or a number read earlier from a newer server; anything else is refused. */
function toWire<Name extends string>(table: Record<Name, number>, value: Name | number, what: string): number {
  if (typeof value === "number" && Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31) return value;
  if (typeof value === "string" && Object.hasOwn(table, value)) return table[value];
  throw new TypeError(`unknown todo ${what} ${JSON.stringify(value)}: use one of ${Object.keys(table).join(", ")}`);
}

export function statusToProto(status: TodoStatus | number): pb.TodoStatus {
  return toWire(STATUSES, status, "status");
}

export function priorityToProto(priority: TodoPriority | number): pb.TodoPriority {
  return toWire(PRIORITIES, priority, "priority");
}

export function todoToProto(todo: NewTodo): pb.Todo {
  return create(pb.TodoSchema, {
    id: todo.id ?? "",
    content: todo.content,
    status: statusToProto(todo.status ?? "pending"),
    priority: priorityToProto(todo.priority ?? "medium"),
    metadata: { ...todo.metadata },
    description: todo.description ?? "",
    activeForm: todo.activeForm ?? "",
    owner: todo.owner ?? "",
    blockedBy: [...(todo.blockedBy ?? [])],
  });
}

/** The typed todo; a status or priority this client has no name for stays its number. */
export function todoFromProto(todo: pb.Todo): Todo {
  return {
    id: todo.id,
    content: todo.content,
    status: STATUS_NAMES.get(todo.status) ?? todo.status,
    priority: PRIORITY_NAMES.get(todo.priority) ?? todo.priority,
    metadata: { ...todo.metadata },
    description: todo.description,
    activeForm: todo.activeForm,
    owner: todo.owner,
    blockedBy: todo.blockedBy,
    blocks: todo.blocks,
    leaseExpiresAt: dateFromProto(todo.leaseExpiresAt),
    leaseDurationMs: todo.leaseDuration === undefined ? undefined : durationMs(todo.leaseDuration),
  };
}

/** What a claim (or renewal) answered; a renewal always changed its lease. */
export function claimFromProto(response: pb.ClaimTodoResponse | pb.RenewClaimResponse): Claim {
  const changed = "changed" in response ? response.changed : true;
  return { todo: response.todo && todoFromProto(response.todo), revision: response.revision, changed };
}

function dateFromProto(timestamp: Timestamp | undefined): Date | undefined {
  if (timestamp === undefined || (timestamp.seconds === 0n && timestamp.nanos === 0)) return undefined;
  return timestampDate(timestamp);
}

export function durationToProto(milliseconds: number | undefined): Duration | undefined {
  return milliseconds === undefined ? undefined : durationFromMs(milliseconds);
}

export function sessionFromProto(session: pb.Session): Session {
  return {
    sessionId: session.sessionId,
    parentId: session.parentId,
    revision: session.revision,
    todoCount: session.todoCount,
    labels: { ...session.labels },
    createdAt: dateFromProto(session.createdAt),
    updatedAt: dateFromProto(session.updatedAt),
    idleTtlMs: session.idleTtl === undefined ? undefined : durationMs(session.idleTtl),
  };
}

/**
 * Whether this client knows the message's change kind: watches skip a newer server's kinds
 * (proto3 enums are open), since the next change carries the whole list again.
 */
export function isKnownKind(kind: pb.ChangeKind): boolean {
  return KIND_NAMES.has(kind);
}

export function watchEventFromProto(message: pb.WatchTodosResponse | pb.WatchChangesResponse): WatchEvent {
  const kind = KIND_NAMES.get(message.kind);
  if (kind === undefined) throw new TypeError(`unknown change kind ${message.kind}`);
  return {
    sessionId: message.sessionId,
    kind,
    revision: message.revision,
    todoId: message.todoId,
    todos: message.todos.map(todoFromProto),
    origin: message.origin,
    removalReason: REASON_NAMES.get(message.removalReason),
    session: message.session && sessionFromProto(message.session),
  };
}

export function feedEventFromProto(message: pb.WatchChangesResponse): FeedEvent {
  return { ...watchEventFromProto(message), cursor: message.cursor };
}

/*
 * The request of each write rpc, built from its write: the client's methods and its batches share
 * them. Origin and request id stay empty here (a batch's nested requests must leave them so); the
 * methods set them on the request.
 */

export function replaceTodosRequest(write: ReplaceTodosWrite): pb.ReplaceTodosRequest {
  return create(pb.ReplaceTodosRequestSchema, {
    sessionId: write.sessionId,
    todos: write.todos.map(todoToProto),
    expectedRevision: write.expectedRevision,
  });
}

export function addTodoRequest(write: AddTodoWrite): pb.AddTodoRequest {
  return create(pb.AddTodoRequestSchema, {
    sessionId: write.sessionId,
    todo: todoToProto(write.todo),
    index: write.index,
    expectedRevision: write.expectedRevision,
  });
}

export function updateTodoRequest(write: UpdateTodoWrite): pb.UpdateTodoRequest {
  return create(pb.UpdateTodoRequestSchema, {
    sessionId: write.sessionId,
    todoId: write.todoId,
    content: write.content,
    status: write.status === undefined ? pb.TodoStatus.UNSPECIFIED : statusToProto(write.status),
    priority: write.priority === undefined ? pb.TodoPriority.UNSPECIFIED : priorityToProto(write.priority),
    metadata: { ...write.metadata },
    removeMetadataKeys: [...(write.removeMetadata ?? [])],
    description: write.description,
    activeForm: write.activeForm,
    owner: write.owner,
    addBlockedBy: [...(write.addBlockedBy ?? [])],
    removeBlockedBy: [...(write.removeBlockedBy ?? [])],
    expectedRevision: write.expectedRevision,
  });
}

export function claimTodoRequest(write: ClaimTodoWrite): pb.ClaimTodoRequest {
  return create(pb.ClaimTodoRequestSchema, {
    sessionId: write.sessionId,
    todoId: write.todoId ?? "",
    owner: write.owner,
    leaseDuration: durationToProto(write.leaseMs),
    expectedRevision: write.expectedRevision,
  });
}

export function renewClaimRequest(write: RenewClaimWrite): pb.RenewClaimRequest {
  return create(pb.RenewClaimRequestSchema, {
    sessionId: write.sessionId,
    todoId: write.todoId,
    owner: write.owner,
    leaseDuration: durationToProto(write.leaseMs),
    expectedRevision: write.expectedRevision,
  });
}

export function releaseTodoRequest(write: ReleaseTodoWrite): pb.ReleaseTodoRequest {
  return create(pb.ReleaseTodoRequestSchema, {
    sessionId: write.sessionId,
    todoId: write.todoId,
    owner: write.owner,
    expectedRevision: write.expectedRevision,
  });
}

export function removeTodoRequest(write: RemoveTodoWrite): pb.RemoveTodoRequest {
  return create(pb.RemoveTodoRequestSchema, {
    sessionId: write.sessionId,
    todoId: write.todoId,
    expectedRevision: write.expectedRevision,
  });
}

export function createSessionRequest(write: CreateSessionWrite): pb.CreateSessionRequest {
  return create(pb.CreateSessionRequestSchema, {
    sessionId: write.sessionId,
    parentId: write.parentId ?? "",
    labels: { ...write.labels },
    idleTtl: durationToProto(write.idleTtlMs),
  });
}

export function updateSessionRequest(write: UpdateSessionWrite): pb.UpdateSessionRequest {
  return create(pb.UpdateSessionRequestSchema, {
    sessionId: write.sessionId,
    labels: { ...write.labels },
    removeLabelKeys: [...(write.removeLabels ?? [])],
    idleTtl: durationToProto(write.idleTtlMs),
    expectedRevision: write.expectedRevision,
  });
}

const WRITE_KINDS: readonly Write["kind"][] = [
  "replace_todos",
  "add_todo",
  "update_todo",
  "remove_todo",
  "claim_todo",
  "renew_claim",
  "release_todo",
  "create_session",
  "update_session",
  "remove_session",
];

/** A write whose kind is none of ours (from JavaScript, where nothing checked it): refused before any call. */
function unknownWriteKind(write: never): never {
  const kind = JSON.stringify((write as { kind?: unknown } | undefined)?.kind);
  throw new TypeError(`unknown write kind ${kind}: use one of ${WRITE_KINDS.join(", ")}`);
}

/** A write's rpc request, in the wire's `operation` oneof. */
function operationToProto(write: Write): pb.Write["operation"] {
  switch (write.kind) {
    case "replace_todos":
      return { case: "replaceTodos", value: replaceTodosRequest(write) };
    case "add_todo":
      return { case: "addTodo", value: addTodoRequest(write) };
    case "update_todo":
      return { case: "updateTodo", value: updateTodoRequest(write) };
    case "remove_todo":
      return { case: "removeTodo", value: removeTodoRequest(write) };
    case "claim_todo":
      return { case: "claimTodo", value: claimTodoRequest(write) };
    case "renew_claim":
      return { case: "renewClaim", value: renewClaimRequest(write) };
    case "release_todo":
      return { case: "releaseTodo", value: releaseTodoRequest(write) };
    case "create_session":
      return { case: "createSession", value: createSessionRequest(write) };
    case "update_session":
      return { case: "updateSession", value: updateSessionRequest(write) };
    case "remove_session":
      return { case: "removeSession", value: create(pb.RemoveSessionRequestSchema, { sessionId: write.sessionId }) };
    default:
      return unknownWriteKind(write);
  }
}

/** One write of a batch as the wire's `Write`. */
export function writeToProto(write: Write): pb.Write {
  return create(pb.WriteSchema, { operation: operationToProto(write) });
}

/** What one write did, typed by the write's `kind` (the wire's result has every field, the kind none). */
export function writeResultFromProto(kind: Write["kind"], result: pb.WriteResult): WriteResult {
  const { revision, changed } = result;
  switch (kind) {
    case "replace_todos":
      return { kind, revision, changed, todoIds: result.todoIds };
    case "add_todo":
      return { kind, revision, changed, todo: todoFromProto(result.todo!), index: result.index };
    case "update_todo":
    case "renew_claim":
    case "release_todo":
      return { kind, revision, changed, todo: todoFromProto(result.todo!) };
    case "claim_todo":
      return { kind, revision, changed, todo: result.todo && todoFromProto(result.todo) };
    case "remove_session":
      return { kind, revision, changed, removedSessionIds: result.removedSessionIds };
    case "remove_todo":
    case "create_session":
    case "update_session":
      return { kind, revision, changed };
  }
}
