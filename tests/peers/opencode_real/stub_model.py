"""A tiny model server that makes real agents write todos: OpenAI chat completions and Anthropic Messages.

Agents are pointed at it instead of a real model: OpenCode (``opencode serve`` or ``opencode
acp``) through a custom provider whose ``baseURL`` is ``base_url`` (see
``opencode_peer.OpenCodeHome``), Qwen Code through ``OPENAI_BASE_URL``, Claude Code
(claude-agent-acp) through ``ANTHROPIC_BASE_URL`` (``anthropic_base_url``). Its answers are
scripted by the prompt, the same way for both APIs:

- the request offers a todo tool (``TODO_TOOLS``: OpenCode's ``todowrite``, Qwen Code's
  ``todo_write``, Claude Code's ``TodoWrite``; or the one name given to ``StubModel``, e.g. an
  MCP tool's as the agent exposes it) and no tool result has come back since the last user
  message that asks: one call of that tool with ``{"todos": <list>}``. The list is the JSON
  value right after ``TODOS:`` in that message (build it with ``todo_prompt``, in the fields
  the agent's tool takes; agents may append reminders after it), or ``DEFAULT_TODOS`` when no
  user message has one;
- anything else (the tool's result came back, a title request without tools): plain text,
  ``TITLE`` for a request without tools.

A prompt may script several tool calls instead (build it with ``calls_prompt``): the JSON list
after ``CALLS:`` holds ``{"tool": name, "arguments": {...}}`` entries, answered one per request, the
next one once the previous one's result came back; ``tool`` matches an offered tool by name or by its
suffix (``task_create`` is Qwen Code's ``mcp__sessiontodo__task_create``). A string argument
``"$2.todo.id"`` stands for that value of the third call's result (its text, read as JSON), so a
script can use the ids the tools return. After the last call comes ``FINAL_TEXT``.

Streaming (OpenAI: SSE chunks then ``data: [DONE]``; Anthropic: its named SSE events) and
non-streaming answers are served, whichever the request asks for. The server runs in its own
thread, so a test that blocks its event loop never stalls an agent; every request body is kept
in ``requests`` for assertions.
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
CALLS_MARKER = "CALLS:"

DEFAULT_TODOS: list[dict[str, str]] = [
    {"content": "Write the failing test", "status": "completed", "priority": "high"},
    {"content": "Implement the feature", "status": "in_progress", "priority": "high"},
    {"content": "Update the docs", "status": "pending", "priority": "medium"},
    {"content": "Drop the legacy flag", "status": "cancelled", "priority": "low"},
]


def todo_prompt(todos: Sequence[Mapping[str, Any]]) -> str:
    """A prompt that makes the stub call the offered todo tool with exactly ``todos``."""
    return f"Plan the work with the todo tool. {TODOS_MARKER} {json.dumps(list(todos))}"


def calls_prompt(calls: Sequence[Mapping[str, Any]]) -> str:
    """A prompt that makes the stub make exactly ``calls`` (``{"tool", "arguments"}``), one per turn."""
    return f"Work through the task list with the task tools. {CALLS_MARKER} {json.dumps(list(calls))}"


def _text_of(message: Mapping[str, Any]) -> str:
    """A message's text, whether ``content`` is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


TODO_TOOLS = ("todowrite", "todo_write", "TodoWrite")
"""The todo tools the stub calls: OpenCode's, Qwen Code's and Claude Code's."""


def _tool_name(tool: Mapping[str, Any]) -> str:
    """A tool's name: OpenAI nests it under ``function``, Anthropic does not."""
    name = tool.get("function", {}).get("name") if "function" in tool else tool.get("name")
    return name if isinstance(name, str) else ""


def _is_tool_result(message: Mapping[str, Any]) -> bool:
    """OpenAI's ``tool`` message, or an Anthropic user message carrying a ``tool_result`` block."""
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return message.get("role") == "tool" or any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in blocks
    )


def todos_asked_for(
    request: Mapping[str, Any], tools: Sequence[str] = TODO_TOOLS
) -> tuple[str, list[dict[str, Any]]] | None:
    """The todo tool (one of ``tools``) the stub calls for this request and the list it writes, or None
    for a text answer.

    Agents add reminders of their own as user messages, so the instruction is read from the last user
    message that has one; a tool result after it means the call was made.
    """
    offered = [name for name in map(_tool_name, request.get("tools") or ()) if name in tools]
    messages = request.get("messages") or []
    users = [i for i, message in enumerate(messages) if message.get("role") == "user" and not _is_tool_result(message)]
    if not offered or not users:
        return None
    asking = next((i for i in reversed(users) if TODOS_MARKER in _text_of(messages[i])), users[-1])
    if any(_is_tool_result(message) for message in messages[asking + 1 :]):
        return None
    text = _text_of(messages[asking])
    if TODOS_MARKER not in text:
        return offered[0], [dict(todo) for todo in DEFAULT_TODOS]
    todos: list[dict[str, Any]] = json.JSONDecoder().raw_decode(text.split(TODOS_MARKER, 1)[1].lstrip())[0]
    return offered[0], todos


def _tool_result_text(message: Mapping[str, Any]) -> str:
    """The text of a tool result: OpenAI's ``tool`` message, or an Anthropic ``tool_result`` block."""
    if message.get("role") == "tool":
        return _text_of(message)
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return _text_of(block) if isinstance(block.get("content"), list) else str(block.get("content", ""))
    return ""


def _json_in(text: str) -> Any:
    """The JSON value a tool result's text holds, or starts holding at its first ``{``."""
    try:
        return json.loads(text)
    except ValueError:
        start = text.find("{")
        return json.JSONDecoder().raw_decode(text[start:])[0] if start >= 0 else None


def _resolved(value: Any, results: Sequence[str]) -> Any:
    """``value`` with each ``"$<n>.<path>"`` string replaced by that value of the n-th tool result."""
    if isinstance(value, dict):
        return {key: _resolved(item, results) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolved(item, results) for item in value]
    if isinstance(value, str) and value.startswith("$") and value[1:2].isdigit():
        number, *path = value[1:].split(".")
        found = _json_in(results[int(number)])
        for key in path:
            found = found[int(key)] if isinstance(found, list) else found[key]
        return found
    return value


def _scripted(request: Mapping[str, Any]) -> bool:
    """Whether a user message scripts the calls (then the todo tool is never called on its own)."""
    messages = request.get("messages") or []
    return any(m.get("role") == "user" and CALLS_MARKER in _text_of(m) for m in messages)


def call_asked_for(request: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The next scripted call (offered tool name, arguments) of the last user message with ``CALLS:``,
    or None: no script, a tool it names is not offered, or every call was made."""
    offered = [name for name in map(_tool_name, request.get("tools") or ()) if name]
    messages = request.get("messages") or []
    asking = next(
        (
            i
            for i in reversed(range(len(messages)))
            if messages[i].get("role") == "user" and CALLS_MARKER in _text_of(messages[i])
        ),
        None,
    )
    if asking is None:
        return None
    calls = json.JSONDecoder().raw_decode(_text_of(messages[asking]).split(CALLS_MARKER, 1)[1].lstrip())[0]
    results = [_tool_result_text(m) for m in messages[asking + 1 :] if _is_tool_result(m)]
    if len(results) >= len(calls):
        return None
    call = calls[len(results)]
    name = next((name for name in offered if name == call["tool"] or name.endswith(f"__{call['tool']}")), None)
    return None if name is None else (name, _resolved(call["arguments"], results))


class _Decision:
    """What the stub answers a request with, whichever API renders it: one tool call, or text."""

    def __init__(self, request: Mapping[str, Any], call_number: int, tools: Sequence[str]) -> None:
        asked: tuple[str, dict[str, Any]] | None = None
        if _scripted(request):
            asked = call_asked_for(request)
        elif (todos := todos_asked_for(request, tools)) is not None:
            asked = todos[0], {"todos": todos[1]}
        self.tool = asked[0] if asked is not None else ""
        self.input = asked[1] if asked is not None else None
        self.call_number = call_number
        self.text = TITLE if not request.get("tools") else FINAL_TEXT

    @property
    def arguments(self) -> str:
        return json.dumps(self.input)


class _Answer(_Decision):
    """One chat completion: rendered whole or as stream chunks."""

    def __init__(self, request: Mapping[str, Any], call_number: int, tools: Sequence[str]) -> None:
        super().__init__(request, call_number, tools)
        self.id = f"chatcmpl-stub{call_number}"
        self.created = int(time.time())
        self.call_id = f"call_stub{call_number}"
        self.finish_reason = "tool_calls" if self.input is not None else "stop"
        self.usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

    def _tool_call(self) -> dict[str, Any]:
        return {"id": self.call_id, "type": "function", "function": {"name": self.tool, "arguments": self.arguments}}

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None if self.input is not None else self.text}
        if self.input is not None:
            message["tool_calls"] = [self._tool_call()]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        return self._envelope("chat.completion", choice) | {"usage": self.usage}

    def chunks(self, include_usage: bool) -> Iterator[dict[str, Any]]:
        yield self._chunk({"role": "assistant", "content": ""})
        if self.input is not None:
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


class _Message(_Decision):
    """One Anthropic Messages answer: rendered whole or as its named stream events."""

    def __init__(self, request: Mapping[str, Any], call_number: int, tools: Sequence[str]) -> None:
        super().__init__(request, call_number, tools)
        self.id = f"msg_stub{call_number}"
        self.model = str(request.get("model") or MODEL_ID)
        self.stop_reason = "tool_use" if self.input is not None else "end_turn"
        self.usage = {"input_tokens": 10, "output_tokens": 5}

    def _block(self) -> dict[str, Any]:
        if self.input is not None:
            return {"type": "tool_use", "id": f"toolu_stub{self.call_number}", "name": self.tool, "input": {}}
        return {"type": "text", "text": ""}

    def message(self) -> dict[str, Any]:
        block = self._block()
        block.update({"input": self.input} if self.input is not None else {"text": self.text})
        return self._head() | {"content": [block], "stop_reason": self.stop_reason, "usage": self.usage}

    def _head(self) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "stop_sequence": None}

    def events(self) -> Iterator[tuple[str, dict[str, Any]]]:
        start = self._head() | {"content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
        yield "message_start", {"type": "message_start", "message": start}
        yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": self._block()}
        if self.input is not None:
            delta = {"type": "input_json_delta", "partial_json": self.arguments}
        else:
            delta = {"type": "text_delta", "text": self.text}
        yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        stop = {"stop_reason": self.stop_reason, "stop_sequence": None}
        yield "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 5}}
        yield "message_stop", {"type": "message_stop"}


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
        route = self.path.split("?", 1)[0].rstrip("/")
        if route.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": 10})
            return
        if not route.endswith(("/chat/completions", "/messages")):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            number = self.server.record(request)
            if route.endswith("/messages"):
                self._anthropic(request, _Message(request, number, self.server.tools))
                return
            answer = _Answer(request, number, self.server.tools)
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

    def _anthropic(self, request: Mapping[str, Any], message: _Message) -> None:
        if not request.get("stream"):
            self._json(200, message.message())
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for name, data in message.events():
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    def _json(self, status: int, body: object) -> None:
        content = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tools: Sequence[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tools = tools
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, request: dict[str, Any]) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests)


class StubModel:
    """The stub model on a free loopback port: ``with StubModel() as model: model.base_url``.

    ``tool`` names the one todo tool it calls (default: whichever of ``TODO_TOOLS`` is offered).
    HTTP/1.0, one connection per request: no keep-alive state to go stale across an OpenCode restart.
    """

    def __init__(self, tool: str | None = None) -> None:
        self._server = _Server((tool,) if tool else TODO_TOOLS)
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-model", daemon=True)

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible ``baseURL``: ``http://127.0.0.1:<port>/v1``."""
        return f"{self.anthropic_base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """``ANTHROPIC_BASE_URL``: the server itself (the Anthropic SDK adds ``/v1/messages``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

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
