"""A stub Anthropic Messages API that makes the real Claude Code CLI call its Task tools as scripted.

Claude Code is pointed at it with ``ANTHROPIC_BASE_URL``. A prompt carries its script: the JSON
list after ``STEPS:`` (build it with ``steps_prompt``), each step one ``[tool name, input]``. For a
request offering tools, the stub answers the next step not yet taken — the number of tool results
that came back since the last user message with a script says how many were — as one streamed
``tool_use`` block; past the last step, plain text. A request without tools (a title) gets text.
So the stub keeps no state per conversation, and one Claude process can run several prompts (its
``--input-format stream-json``), each a script of its own.

The Task tools are deferred: a script starts with ``ToolSearch`` (``SELECT_TASK_TOOLS``) so that the
next request carries their schemas. Every request body is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STEPS_MARKER = "STEPS:"
FINAL_TEXT = "Done."
SELECT_TASK_TOOLS = ("ToolSearch", {"query": "select:TaskCreate,TaskGet,TaskList,TaskUpdate"})
"""The step that loads the deferred Task tools' schemas."""

Step = tuple[str, Mapping[str, Any]]


def steps_prompt(*steps: Step) -> str:
    """A prompt that makes the stub call ``steps`` in order, one per model turn."""
    return f"Work through the task list. {STEPS_MARKER} {json.dumps([[name, dict(args)] for name, args in steps])}"


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _is_tool_result(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )


def next_step(request: Mapping[str, Any]) -> Step | None:
    """The scripted tool call that answers ``request``, or None for a text answer."""
    if not request.get("tools"):
        return None
    messages = request.get("messages") or []
    asking = [
        i
        for i, message in enumerate(messages)
        if message.get("role") == "user" and not _is_tool_result(message) and STEPS_MARKER in _text_of(message)
    ]
    if not asking:
        return None
    text = _text_of(messages[asking[-1]])
    steps = json.JSONDecoder().raw_decode(text.split(STEPS_MARKER, 1)[1].lstrip())[0]
    taken = sum(1 for message in messages[asking[-1] + 1 :] if _is_tool_result(message))
    if taken >= len(steps):
        return None
    name, arguments = steps[taken]
    return str(name), arguments


def _events(request: Mapping[str, Any], number: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """One answer as Anthropic's named stream events."""
    step = next_step(request)
    head = {
        "id": f"msg_stub{number}",
        "type": "message",
        "role": "assistant",
        "model": str(request.get("model") or "stub-model"),
        "stop_sequence": None,
    }
    start: dict[str, Any] = head | {
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": start}
    if step is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": FINAL_TEXT}
    else:
        block = {"type": "tool_use", "id": f"toolu_stub{number}", "name": step[0], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(step[1])}
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    stop = {"stop_reason": "end_turn" if step is None else "tool_use", "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the test output is for failures
        pass

    def do_POST(self) -> None:
        route = self.path.split("?", 1)[0].rstrip("/")
        if route.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": 10})
            return
        if not route.endswith("/messages"):
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
            return
        request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        number = self.server.record(request)
        if not request.get("stream"):
            self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "stream only"}})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for name, data in _events(request, number):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        step = next_step(request)
        if step is not None:
            self.server.answered.append((step, time.time()))

    def _json(self, status: int, body: object) -> None:
        content = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.answered: list[tuple[Step, float]] = []
        self._lock = threading.Lock()

    def record(self, request: dict[str, Any]) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests)


class StubAnthropic:
    """The stub on a free loopback port, in its own thread: ``with StubAnthropic() as api: api.base_url``."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-anthropic", daemon=True)

    @property
    def base_url(self) -> str:
        """``ANTHROPIC_BASE_URL`` (the CLI adds ``/v1/messages``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> Sequence[dict[str, Any]]:
        return list(self._server.requests)

    @property
    def answered(self) -> Sequence[tuple[Step, float]]:
        """Every tool call sent, with the time (``time.time()``) its answer was written whole."""
        return list(self._server.answered)

    def __enter__(self) -> StubAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
