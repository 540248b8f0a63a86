"""The MCP server: each MCP session edits one sessiontodo session's list through the tools and its resource.

Built on the SDK's low-level ``Server``, whose lifespan runs once per MCP session (once per process
over stdio, once per ``Mcp-Session-Id`` over streamable HTTP): that is where each session's
``McpSession`` lives, with the task group that owns its subscriptions' watches, so nothing
outlives the MCP session that started it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import aclosing, asynccontextmanager
from importlib.metadata import version
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.session import ServerSession
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl
from starlette.requests import Request

from sessiontodo_client import InvalidArgument, NotFound, ServiceError, TodoClient
from sessiontodo_client.plans import keeping_graph, replace_plan
from sessiontodo_mcp.tasks import TASK_TOOLS, TaskTools
from sessiontodo_mcp.tools import (
    ORIGIN,
    TODO_READ,
    TODO_WRITE,
    TOOLS,
    ToolFailure,
    changes_from,
    check_arguments,
    error_result,
    failure_text,
    list_json,
    resource_uri,
    todos_from,
    update_json,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

SESSION_HEADER = "Sessiontodo-Session-Id"
"""HTTP request header naming the sessiontodo session an MCP session resumes (default: a new one)."""

REVISION_META = "sessiontodo/revision"
"""The ``_meta`` key of an update notification and of a read resource: the list's revision it is about."""

RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC error code the MCP specification gives an unknown resource."""

INSTRUCTIONS = (
    "This server keeps your todo list (your plan) for this session in sessiontodo, where people and other "
    "agents can see it. Plan work of several steps with todo_write, keep it current as you go (one todo "
    "in_progress at a time, completed as soon as done), and read it back with todo_read. When several agents "
    "share the list, use the task tools: task_create with blocked_by for work that waits on other work, "
    "task_list (ready: true) to find free work, task_claim to take it, task_update to complete it."
)

Context = RequestContext[ServerSession, "McpSession", Any]


class McpSession:
    """One MCP session's state: which sessiontodo session it edits, and the watches behind its subscriptions.

    The sessiontodo session is resolved on first use, when the client's name (``initialize``'s
    ``clientInfo``) is known: the configured id (``--session-id``, or the ``Sessiontodo-Session-Id``
    header of an HTTP request) is got or created, else a new session is, labelled ``client``.
    """

    def __init__(self, client: TodoClient, tasks: TaskGroup, *, session_id: str | None, idle_ttl: float | None):
        self._client = client
        self._tasks = tasks
        self._configured_id = session_id
        self._idle_ttl = idle_ttl
        self._session_id: str | None = None
        self._resolving = anyio.Lock()
        self._watches: dict[str, anyio.CancelScope] = {}

    async def session_id(self, context: Context) -> str:
        """The sessiontodo session of this MCP session, got or created by the first call that needs it."""
        async with self._resolving:
            if self._session_id is None:
                request = context.request
                header = request.headers.get(SESSION_HEADER) if isinstance(request, Request) else None
                params = context.session.client_params
                labels = {"client": params.clientInfo.name} if params is not None else {}
                session, created = await self._client.create_session(
                    self._configured_id or header or "", labels=labels, idle_ttl=self._idle_ttl, origin=ORIGIN
                )
                self._session_id = session.session_id
                log.info("%s sessiontodo session %s", "created" if created else "resumed", self._session_id)
            return self._session_id

    async def call_tool(self, context: Context, name: str, arguments: dict[str, Any]) -> Any:
        """The tool's result, or a tool error (``isError``) saying why it failed; never an exception."""
        if (task_tool := TASK_TOOLS.get(name)) is not None:
            try:
                session_id = await self.session_id(context)
            except ServiceError as error:
                return error_result(failure_text(error))
            return await TaskTools(self._client, session_id).call(task_tool, arguments)
        tool = TOOLS.get(name)
        if tool is None:
            return error_result(f"not found: no tool {name!r}; the tools are {', '.join([*TOOLS, *TASK_TOOLS])}")
        try:
            check_arguments(tool, arguments)
            session_id = await self.session_id(context)
            expected = arguments.get("expected_revision")
            if tool is TODO_READ:
                return list_json(session_id, await self._client.get_todos(session_id))
            if tool is TODO_WRITE:
                todos = todos_from(arguments)  # owners and dependencies of the todos they continue are kept
                _, stored = await replace_plan(
                    self._client,
                    session_id,
                    lambda current: keeping_graph(todos, current),
                    expected_revision=expected,
                    origin=ORIGIN,
                )
                return list_json(session_id, stored)
            changes = changes_from(arguments)
            updated = await self._client.update_todo(
                session_id, arguments["id"], **changes, expected_revision=expected, origin=ORIGIN
            )
            return update_json(session_id, updated)
        except ToolFailure as failure:
            return error_result(str(failure))
        except ServiceError as error:
            return error_result(failure_text(error))

    async def resources(self, context: Context) -> list[types.Resource]:
        session_id = await _or_mcp_error(self.session_id(context))
        return [
            types.Resource(
                uri=AnyUrl(resource_uri(session_id)),
                name="todos",
                title="This session's todo list",
                description="The list todo_read returns, as JSON; subscribe to hear of every change, whoever makes it.",
                mimeType="application/json",
            )
        ]

    async def read(self, context: Context, uri: AnyUrl) -> list[ReadResourceContents]:
        session_id = await self._own(context, uri)
        todo_list = await _or_mcp_error(self._client.get_todos(session_id))
        return [
            ReadResourceContents(
                json.dumps(list_json(session_id, todo_list)),
                "application/json",
                meta={REVISION_META: todo_list.revision},
            )
        ]

    async def subscribe(self, context: Context, uri: AnyUrl) -> None:
        """Follow the session's list from its current revision: every later change, made by anyone, sends
        ``notifications/resources/updated`` until unsubscribed or the session is removed."""
        session_id = await self._own(context, uri)
        if str(uri) in self._watches:
            return
        revision = (await _or_mcp_error(self._client.get_todos(session_id))).revision
        scope = anyio.CancelScope()
        self._watches[str(uri)] = scope
        self._tasks.start_soon(self._follow, context.session, session_id, uri, revision, scope)

    async def unsubscribe(self, context: Context, uri: AnyUrl) -> None:
        await self._own(context, uri)
        if scope := self._watches.pop(str(uri), None):
            scope.cancel()

    async def _own(self, context: Context, uri: AnyUrl) -> str:
        """The session id if ``uri`` is this MCP session's list; no other session's list is reachable here."""
        session_id = await _or_mcp_error(self.session_id(context))
        if str(uri) != resource_uri(session_id):
            raise McpError(types.ErrorData(code=RESOURCE_NOT_FOUND, message=f"Resource not found: {uri}"))
        return session_id

    async def _follow(
        self, session: ServerSession, session_id: str, uri: AnyUrl, revision: int, scope: anyio.CancelScope
    ) -> None:
        """Notify the client of each change after ``revision``; the client's watch resumes across outages."""
        with scope:
            try:
                async with aclosing(self._client.watch(session_id, revision)) as changes:
                    async for change in changes:
                        await session.send_notification(_updated(uri, change.revision))
                log.info("%s was removed: its subscription ends", session_id)
            except ServiceError as error:
                log.warning("subscription to %s ended: %s", uri, error)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                log.debug("the MCP session of the subscription to %s closed", uri)
            except Exception:  # one subscription's failure must not end its MCP session (the task group's)
                log.exception("subscription to %s failed", uri)
            finally:
                if self._watches.get(str(uri)) is scope:
                    del self._watches[str(uri)]


def _updated(uri: AnyUrl, revision: int) -> types.ServerNotification:
    """``notifications/resources/updated`` naming the revision the list reached: a client that reads the
    resource after it can tell whether its read is that change or a newer one."""
    params = types.ResourceUpdatedNotificationParams.model_validate({"uri": uri, "_meta": {REVISION_META: revision}})
    return types.ServerNotification(types.ResourceUpdatedNotification(params=params))


async def _or_mcp_error(call: Awaitable[T]) -> T:
    """A resource request's sessiontodo call, whose failure becomes the request's JSON-RPC error."""
    try:
        return await call
    except NotFound as error:
        raise McpError(types.ErrorData(code=RESOURCE_NOT_FOUND, message=failure_text(error))) from None
    except InvalidArgument as error:
        raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=failure_text(error))) from None
    except ServiceError as error:
        raise McpError(types.ErrorData(code=types.INTERNAL_ERROR, message=failure_text(error))) from None


class _Server(Server[McpSession, Any]):
    def get_capabilities(
        self, notification_options: NotificationOptions, experimental_capabilities: dict[str, dict[str, Any]]
    ) -> types.ServerCapabilities:
        """The SDK's capabilities, plus resource subscriptions (it never announces them itself)."""
        capabilities = super().get_capabilities(notification_options, experimental_capabilities)
        capabilities.resources = types.ResourcesCapability(subscribe=True, listChanged=False)
        return capabilities


def build_server(
    client: TodoClient, *, session_id: str | None = None, idle_ttl: float | None = None
) -> Server[Any, Any]:
    """The MCP server for the sessiontodo service behind ``client``; serve it over stdio or HTTP.

    ``session_id`` fixes the sessiontodo session of every MCP session (stdio's ``--session-id``);
    ``idle_ttl`` is given to the sessions it creates.
    """

    @asynccontextmanager
    async def per_mcp_session(_server: Server[McpSession, Any]) -> AsyncIterator[McpSession]:
        async with anyio.create_task_group() as tasks:
            yield McpSession(client, tasks, session_id=session_id, idle_ttl=idle_ttl)
            tasks.cancel_scope.cancel()

    server = _Server("sessiontodo", version=version("sessiontodo"), instructions=INSTRUCTIONS, lifespan=per_mcp_session)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [*TOOLS.values(), *TASK_TOOLS.values()]

    @server.call_tool(validate_input=False)  # checked by McpSession.call_tool, naming the field at fault
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        context = server.request_context
        return await context.lifespan_context.call_tool(context, name, arguments)

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        context = server.request_context
        return await context.lifespan_context.resources(context)

    @server.list_resource_templates()
    async def list_resource_templates() -> list[types.ResourceTemplate]:
        """None: an MCP session reads its own list only, which ``resources/list`` names. Answered all the
        same, since clients (the MCP Inspector, SDK helpers) ask, and -32601 reads as a broken server."""
        return []

    @server.read_resource()
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        context = server.request_context
        return await context.lifespan_context.read(context, uri)

    @server.subscribe_resource()
    async def subscribe(uri: AnyUrl) -> None:
        context = server.request_context
        await context.lifespan_context.subscribe(context, uri)

    @server.unsubscribe_resource()
    async def unsubscribe(uri: AnyUrl) -> None:
        context = server.request_context
        await context.lifespan_context.unsubscribe(context, uri)

    return server
