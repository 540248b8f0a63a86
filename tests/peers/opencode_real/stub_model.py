"""A tiny OpenAI-compatible chat-completions server that makes a real OpenCode write todos.

OpenCode (``opencode serve`` or ``opencode acp``) is configured with a custom provider whose
``baseURL`` is this server (see ``opencode_peer.OpenCodeHome``). Its answers are scripted
by the prompt:

- the last message is the user's and the request offers the todo tool (``todowrite``, or the
  name given to ``StubModel``, e.g. an MCP tool's as the agent exposes it): one call of it with
  ``{"todos": [...]}``. The list is the JSON after ``TODOS:`` in the prompt (build it with
  ``todo_prompt``), or ``DEFAULT_TODOS`` when the prompt has none;
- anything else (the tool's result came back, OpenCode's title request without tools):
  plain text, ``TITLE`` for a title request.

Both streaming (SSE chunks, then ``data: [DONE]``) and non-streaming answers are served,
whichever the request asks for. The server runs in its own thread, so a test that blocks its
event loop never stalls OpenCode; every request body is kept in ``requests`` for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "stub-model"
TITLE = "Todo stub session"
FINAL_TEXT = "The todo list is written."
TODOS_MARKER = "TODOS:"
TODO_TOOL = "todowrite"
"""OpenCode's todo tool: the one the stub calls unless told another name."""

DEFAULT_TODOS: list[dict[str, str]] = [
    {"content": "Write the failing test", "status": "completed", "priority": "high"},
    {"content": "Implement the feature", "status": "in_progress", "priority": "high"},
    {"content": "Update the docs", "status": "pending", "priority": "medium"},
    {"content": "Drop the legacy flag", "status": "cancelled", "priority": "low"},
]


def todo_prompt(todos: Sequence[Mapping[str, str]]) -> str:
    """A prompt that makes the stub call its todo tool with exactly ``todos``."""
    return f"Plan the work with the todo tool. {TODOS_MARKER} {json.dumps(list(todos))}"


def _text_of(message: Mapping[str, Any]) -> str:
    """A message's text, whether ``content`` is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _offers_tool(request: Mapping[str, Any], name: str) -> bool:
    return any(tool.get("function", {}).get("name") == name for tool in request.get("tools") or ())


def todos_asked_for(request: Mapping[str, Any], tool: str = TODO_TOOL) -> list[dict[str, str]] | None:
    """The list the stub writes for this request, or None when it answers with text.

    Only the JSON value right after ``TODOS:`` is read: agents may append reminders to the prompt.
    """
    messages = request.get("messages") or []
    if not messages or messages[-1].get("role") != "user" or not _offers_tool(request, tool):
        return None
    text = _text_of(messages[-1])
    if TODOS_MARKER not in text:
        return DEFAULT_TODOS
    todos: list[dict[str, str]] = json.JSONDecoder().raw_decode(text.split(TODOS_MARKER, 1)[1].lstrip())[0]
    return todos


class _Answer:
    """One completion: either a todo tool call or text, rendered whole or as stream chunks."""

    def __init__(self, request: Mapping[str, Any], call_number: int, tool: str) -> None:
        self.id = f"chatcmpl-stub{call_number}"
        self.created = int(time.time())
        self.tool = tool
        self.todos = todos_asked_for(request, tool)
        self.call_id = f"call_stub{call_number}"
        self.text = TITLE if not request.get("tools") else FINAL_TEXT
        self.finish_reason = "tool_calls" if self.todos is not None else "stop"
        self.usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

    def _tool_call(self) -> dict[str, Any]:
        arguments = json.dumps({"todos": self.todos})
        return {"id": self.call_id, "type": "function", "function": {"name": self.tool, "arguments": arguments}}

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None if self.todos is not None else self.text}
        if self.todos is not None:
            message["tool_calls"] = [self._tool_call()]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        return self._envelope("chat.completion", choice) | {"usage": self.usage}

    def chunks(self, include_usage: bool) -> Iterator[dict[str, Any]]:
        yield self._chunk({"role": "assistant", "content": ""})
        if self.todos is not None:
            yield self._chunk({"tool_calls": [{"index": 0, **self._tool_call()}]})
        else:
            yield self._chunk({"content": self.text})
        yield self._chunk({}, self.finish_reason)
        if include_usage:
            yield self._envelope("chat.completion.chunk") | {"choices": [], "usage": self.usage}

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return self._envelope("chat.completion.chunk", {"index": 0, "delta": delta, "finish_reason": finish_reason})

    def _envelope(self, kind: str, choice: dict[str, Any] | None = None) -> dict[str, Any]:
        envelope: dict[str, Any] = {"id": self.id, "object": kind, "created": self.created, "model": MODEL_ID}
        if choice is not None:
            envelope["choices"] = [choice]
        return envelope


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the test output is for failures
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "stub"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            answer = _Answer(request, self.server.record(request), self.server.tool)
        except (ValueError, TypeError, AttributeError) as error:
            self._json(400, {"error": {"message": f"bad request: {error}", "type": "invalid_request_error"}})
            return
        if not request.get("stream"):
            self._json(200, answer.completion())
            return
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for chunk in answer.chunks(include_usage):
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def _json(self, status: int, body: object) -> None:
        content = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tool: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tool = tool
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, request: dict[str, Any]) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests)


class StubModel:
    """The stub model on a free loopback port: ``with StubModel() as model: model.base_url``.

    ``tool`` names the todo tool it calls. HTTP/1.0, one connection per request: no keep-alive
    state to go stale across an OpenCode restart.
    """

    def __init__(self, tool: str = TODO_TOOL) -> None:
        self._server = _Server(tool)
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-model", daemon=True)

    @property
    def base_url(self) -> str:
        """The provider's ``baseURL``: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat-completions request body received, in order."""
        return list(self._server.requests)

    def start(self) -> StubModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> StubModel:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
