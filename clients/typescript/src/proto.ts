/**
 * `@sessiontodo/client/proto`: the generated protobuf-es code itself (messages, enums, the
 * `TodoService` descriptor), for callers who build their own connect client or decode raw bytes.
 */

export * from "./gen/sessiontodo/v1/todo_service_pb.js";
