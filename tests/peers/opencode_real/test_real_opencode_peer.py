"""The stub model on its own, and the real OpenCode writing todos through it (the peer the other suites use)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.peers.opencode_real.opencode_peer import OpenCodeServer
from tests.peers.opencode_real.stub_model import DEFAULT_TODOS, TITLE, StubModel, todo_prompt

TODOWRITE_TOOL = {"type": "function", "function": {"name": "todowrite", "parameters": {"type": "object"}}}
WANTED = [
    {"content": "Write the failing test", "status": "in_progress", "priority": "high"},
    {"content": "Ship it", "status": "blocked", "priority": "urgent"},
]


def chat(prompt: str, *, stream: bool, tools: bool = True) -> dict[str, Any]:
    request: dict[str, Any] = {"model": "stub-model", "stream": stream, "stream_options": {"include_usage": True}}
    request["messages"] = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    if tools:
        request["tools"] = [TODOWRITE_TOOL]
    return request


def sse_chunks(body: str) -> list[dict[str, Any]]:
    frames = [frame.removeprefix("data: ") for frame in body.split("\n\n") if frame]
    assert frames[-1] == "[DONE]", frames
    return [json.loads(frame) for frame in frames[:-1]]


async def test_the_stub_model_answers_a_todo_prompt_with_one_todowrite_call(stub_model: StubModel) -> None:
    async with httpx.AsyncClient(base_url=stub_model.base_url) as http:
        response = await http.post("/chat/completions", json=chat(todo_prompt(WANTED), stream=False))

    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "todowrite"
    assert json.loads(call["function"]["arguments"]) == {"todos": WANTED}


async def test_the_stub_model_streams_the_same_call_as_chunks_then_done(stub_model: StubModel) -> None:
    async with httpx.AsyncClient(base_url=stub_model.base_url) as http:
        response = await http.post("/chat/completions", json=chat("make a todo list", stream=True))

    assert response.headers["content-type"] == "text/event-stream"
    chunks = sse_chunks(response.text)
    choices = [choice for chunk in chunks for choice in chunk["choices"]]
    calls = [call for choice in choices for call in choice["delta"].get("tool_calls", ())]
    assert [json.loads(call["function"]["arguments"]) for call in calls] == [{"todos": DEFAULT_TODOS}]
    assert choices[-1]["finish_reason"] == "tool_calls"
    assert "usage" in chunks[-1]


async def test_the_stub_model_answers_with_text_after_the_tool_result_and_to_a_title_request(
    stub_model: StubModel,
) -> None:
    after_tool = chat("make a todo list", stream=False)
    after_tool["messages"].append({"role": "tool", "tool_call_id": "c", "content": "ok"})
    async with httpx.AsyncClient(base_url=stub_model.base_url) as http:
        final = (await http.post("/chat/completions", json=after_tool)).json()
        title = (await http.post("/chat/completions", json=chat("make a todo list", stream=False, tools=False))).json()
        models = (await http.get("/models")).json()

    assert final["choices"][0]["finish_reason"] == "stop"
    assert "tool_calls" not in final["choices"][0]["message"]
    assert title["choices"][0]["message"]["content"] == TITLE
    assert [model["id"] for model in models["data"]] == ["stub-model"]
    assert len(stub_model.requests) == 2


@pytest.mark.slow
@pytest.mark.process
async def test_a_real_opencode_prompted_through_the_stub_model_writes_exactly_the_asked_todos(
    opencode: OpenCodeServer, stub_model: StubModel
) -> None:
    async with httpx.AsyncClient(base_url=opencode.url, timeout=30.0) as http:
        session = (await http.post("/session", json={})).json()
        await opencode.write_todos(session["id"], WANTED)
        listed = (await http.get(f"/session/{session['id']}/todo")).json()

    assert listed == WANTED  # any status/priority string is stored as given
    assert any(request.get("stream") for request in stub_model.requests)
