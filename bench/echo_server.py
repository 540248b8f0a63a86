"""The baseline: a bare ``grpc.aio`` server speaking TodoService's methods and messages, and nothing else.

Every rpc is registered the plain way (unary-unary and unary-stream handlers, grpc decoding the
request): no request guard, no interceptors, no error translation. That is the floor a user
compares a gRPC service with, so every ratio of ``make bench`` is taken against it.

Each unary method decodes its real request type and encodes its real response type, built
straight from the request: no validation, no store, no revisions worth the name. WatchTodos
streams hold an ``asyncio.Queue`` each; every write encodes one ``WatchTodosResponse`` and puts
the same bytes on every open stream; RemoveSession / RemoveAllSessions end them all. That is
the least work any watch server must do, so the sessiontodo server is measured against it.

Run: ``python bench/echo_server.py --port 50052`` (logs to stderr; SIGTERM stops it).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf import message_factory

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_server.event_loop import loop_factory

_END = b""
"""Queue sentinel: the stream ends after its final message."""


class EchoServicer:
    """TodoService's surface with none of its behaviour; all sessions are one."""

    def __init__(self) -> None:
        self._revision = 0
        self._todos: list[pb.Todo] = []
        self._streams: set[asyncio.Queue[bytes]] = set()

    def _publish(self, kind: pb.ChangeKind.ValueType, session_id: str, todo_id: str = "") -> None:
        if not self._streams:
            return
        encoded = pb.WatchTodosResponse(
            kind=kind, revision=self._revision, todo_id=todo_id, todos=self._todos, session_id=session_id
        ).SerializeToString()
        for stream in self._streams:
            stream.put_nowait(encoded)

    def _end_streams(self, session_id: str) -> None:
        removed = pb.WatchTodosResponse(
            kind=pb.CHANGE_KIND_SESSION_REMOVED, revision=self._revision + 1, session_id=session_id
        ).SerializeToString()
        for stream in self._streams:
            stream.put_nowait(removed)
            stream.put_nowait(_END)

    async def CreateSession(self, request: pb.CreateSessionRequest, context: Any) -> pb.CreateSessionResponse:
        session = pb.Session(session_id=request.session_id or "echo", parent_id=request.parent_id)
        return pb.CreateSessionResponse(session=session, created=True)

    async def GetSession(self, request: pb.GetSessionRequest, context: Any) -> pb.GetSessionResponse:
        return pb.GetSessionResponse(session=pb.Session(session_id=request.session_id, revision=self._revision))

    async def UpdateSession(self, request: pb.UpdateSessionRequest, context: Any) -> pb.UpdateSessionResponse:
        self._revision += 1
        self._publish(pb.CHANGE_KIND_SESSION_UPDATED, request.session_id)
        session = pb.Session(session_id=request.session_id, revision=self._revision, labels=request.labels)
        return pb.UpdateSessionResponse(session=session, changed=True)

    async def BatchGetTodos(self, request: pb.BatchGetTodosRequest, context: Any) -> pb.BatchGetTodosResponse:
        return pb.BatchGetTodosResponse(
            sessions=[
                pb.SessionTodos(session=pb.Session(session_id=session_id, revision=self._revision), todos=self._todos)
                for session_id in request.session_ids
            ]
        )

    async def RemoveSession(self, request: pb.RemoveSessionRequest, context: Any) -> pb.RemoveSessionResponse:
        self._end_streams(request.session_id)
        return pb.RemoveSessionResponse(existed=True, removed_session_ids=[request.session_id])

    async def RemoveAllSessions(
        self, request: pb.RemoveAllSessionsRequest, context: Any
    ) -> pb.RemoveAllSessionsResponse:
        self._end_streams("")
        return pb.RemoveAllSessionsResponse(removed_count=0)

    async def ListSessions(self, request: pb.ListSessionsRequest, context: Any) -> pb.ListSessionsResponse:
        return pb.ListSessionsResponse()

    async def GetTodos(self, request: pb.GetTodosRequest, context: Any) -> pb.GetTodosResponse:
        return pb.GetTodosResponse(todos=self._todos, revision=self._revision)

    async def ReplaceTodos(self, request: pb.ReplaceTodosRequest, context: Any) -> pb.ReplaceTodosResponse:
        self._revision += 1
        self._todos = list(request.todos)
        self._publish(pb.CHANGE_KIND_TODOS_REPLACED, request.session_id)
        return pb.ReplaceTodosResponse(todos=request.todos, revision=self._revision)

    async def AddTodo(self, request: pb.AddTodoRequest, context: Any) -> pb.AddTodoResponse:
        self._revision += 1
        self._publish(pb.CHANGE_KIND_TODO_ADDED, request.session_id, request.todo.id)
        return pb.AddTodoResponse(todo=request.todo, index=request.index, revision=self._revision)

    async def UpdateTodo(self, request: pb.UpdateTodoRequest, context: Any) -> pb.UpdateTodoResponse:
        self._revision += 1
        self._publish(pb.CHANGE_KIND_TODO_UPDATED, request.session_id, request.todo_id)
        todo = pb.Todo(id=request.todo_id, content=request.content, status=request.status, priority=request.priority)
        return pb.UpdateTodoResponse(todo=todo, revision=self._revision, changed=True)

    async def RemoveTodo(self, request: pb.RemoveTodoRequest, context: Any) -> pb.RemoveTodoResponse:
        self._revision += 1
        self._publish(pb.CHANGE_KIND_TODO_REMOVED, request.session_id, request.todo_id)
        return pb.RemoveTodoResponse(revision=self._revision)

    async def ClaimTodo(self, request: pb.ClaimTodoRequest, context: Any) -> pb.ClaimTodoResponse:
        self._revision += 1
        self._publish(pb.CHANGE_KIND_TODO_UPDATED, request.session_id, request.todo_id)
        return pb.ClaimTodoResponse(todo=pb.Todo(id=request.todo_id), revision=self._revision, changed=True)

    async def RenewClaim(self, request: pb.RenewClaimRequest, context: Any) -> pb.RenewClaimResponse:
        self._revision += 1
        self._publish(pb.CHANGE_KIND_TODO_UPDATED, request.session_id, request.todo_id)
        return pb.RenewClaimResponse(todo=pb.Todo(id=request.todo_id), revision=self._revision)

    async def ReleaseTodo(self, request: pb.ReleaseTodoRequest, context: Any) -> pb.ReleaseTodoResponse:
        self._revision += 1
        self._publish(pb.CHANGE_KIND_TODO_UPDATED, request.session_id, request.todo_id)
        return pb.ReleaseTodoResponse(todo=pb.Todo(id=request.todo_id), revision=self._revision)

    async def BatchWrite(self, request: pb.BatchWriteRequest, context: Any) -> pb.BatchWriteResponse:
        response = pb.BatchWriteResponse()
        for write in request.writes:
            self._revision += 1
            self._publish(pb.CHANGE_KIND_TODOS_REPLACED, getattr(write, write.WhichOneof("operation") or "").session_id)
            response.results.add(revision=self._revision, changed=True)
        return response

    async def WatchTodos(self, request: pb.WatchTodosRequest, context: Any) -> AsyncIterator[bytes]:
        """A snapshot, then whatever the writes put on this stream's queue, until the end sentinel."""
        stream: asyncio.Queue[bytes] = asyncio.Queue()
        self._streams.add(stream)
        try:
            yield pb.WatchTodosResponse(
                kind=pb.CHANGE_KIND_SNAPSHOT, revision=self._revision, todos=self._todos, session_id=request.session_id
            ).SerializeToString()
            while (encoded := await stream.get()) is not _END:
                yield encoded
        finally:
            self._streams.discard(stream)

    async def WatchChanges(self, request: pb.WatchChangesRequest, context: Any) -> AsyncIterator[bytes]:
        """Every write, like WatchTodos, without a snapshot."""
        stream: asyncio.Queue[bytes] = asyncio.Queue()
        self._streams.add(stream)
        try:
            while (encoded := await stream.get()) is not _END:
                yield encoded
        finally:
            self._streams.discard(stream)


def add_bare(server: grpc.aio.Server, servicer: EchoServicer) -> None:
    """Each rpc as grpc's generated code registers it; the streams yield bytes already encoded."""
    service = pb.DESCRIPTOR.services_by_name["TodoService"]
    handlers = {}
    for method in service.methods:
        parse = message_factory.GetMessageClass(method.input_type).FromString
        behaviour = getattr(servicer, method.name)
        if method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(behaviour, request_deserializer=parse)
        else:
            serialize = message_factory.GetMessageClass(method.output_type).SerializeToString
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                behaviour, request_deserializer=parse, response_serializer=serialize
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


async def serve(host: str, port: int, guarded: bool) -> None:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    if guarded:  # registered exactly as the real service is: what the request guard costs
        from sessiontodo_server.api.request_guard import DEFAULT_REQUEST_TIMEOUT, Deadlines
        from sessiontodo_server.api.servicer import add_todo_service

        add_todo_service(server, EchoServicer(), Deadlines(DEFAULT_REQUEST_TIMEOUT))
    else:
        add_bare(server, EchoServicer())
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.stop(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--event-loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    parser.add_argument("--guarded", action="store_true", help="register behind the server's request guard")
    arguments = parser.parse_args()
    with asyncio.Runner(loop_factory=loop_factory(arguments.event_loop)) as runner:
        runner.run(serve(arguments.host, arguments.port, arguments.guarded))


if __name__ == "__main__":
    main()
