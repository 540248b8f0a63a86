/** `@sessiontodo/client`: the typed client of the sessiontodo gRPC service. */

export {
  TodoClient,
  KEEPALIVE_INTERVAL_MS,
  newSessionId,
  type AddTodoOptions,
  type ClientOptions,
  type ConnectOptions,
  type CreateSessionOptions,
  type ListSessionsOptions,
  type Origin,
  type UpdateSessionOptions,
  type UpdateTodoOptions,
  type WatchChangesOptions,
  type WatchOptions,
  type WriteOptions,
} from "./client.js";
export {
  Aborted,
  Code,
  codeName,
  FailedPrecondition,
  InvalidArgument,
  NotFound,
  PermissionDenied,
  ResourceExhausted,
  ServiceError,
  Unauthenticated,
  Unavailable,
  type ErrorDetails,
  type FieldViolation,
  type QuotaViolation,
} from "./errors.js";
export { FeedPosition, RESET_MARKER } from "./feed.js";
export type {
  AddedTodo,
  ChangeKind,
  FeedEvent,
  NewTodo,
  RemovalReason,
  Session,
  SessionTodos,
  Todo,
  TodoList,
  TodoPriority,
  TodoStatus,
  UpdatedTodo,
  WatchEvent,
} from "./models.js";
export { DEFAULT_RETRY, isTransient, RetryPolicy, type RetryOptions, type RunOptions } from "./retry.js";
export { ChannelSecurity, isLoopback, type ChannelSecurityOptions, type SecurityFiles } from "./security.js";
