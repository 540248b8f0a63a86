/** Pure conversions between the typed values (models.ts) and the generated protobuf messages. */

import { create } from "@bufbuild/protobuf";
import { durationFromMs, durationMs, timestampDate, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";

import * as pb from "./gen/sessiontodo/v1/todo_service_pb.js";
import type {
  ChangeKind,
  FeedEvent,
  NewTodo,
  RemovalReason,
  Session,
  Todo,
  TodoPriority,
  TodoStatus,
  WatchEvent,
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
  };
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
