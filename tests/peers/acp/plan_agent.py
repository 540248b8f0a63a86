"""A small ACP agent, written with the official Python SDK, that sends plans on command.

Run over stdio: ``python tests/peers/acp/plan_agent.py``. A prompt whose text is JSON
``{"plans": [[entry, …], …]}`` makes it send each plan, in order, as a ``session/update``
``plan`` notification, then end the turn (a plan given as ``{"entries": […], "_meta": {…}}``
carries a plan-level ``_meta``). The next plan protocol too: ``{"planUpdate": {"type", "planId",
…}}`` is sent as a ``plan_update`` and ``{"planRemoved": "<planId>"}`` as a ``plan_removed``, as
given. Entries are sent exactly as given: valid ones
through the SDK's typed ``session_update``, lists with values outside ACP's sets as raw
JSON (the SDK would refuse to build them). ``session/new`` takes the session id from
``_meta.wantedSessionId`` when given, else makes one up. It supports ``session/load`` (replaying the last
plan it sent for the session, if it knows the session), ``session/close``, ``session/delete``
(which forgets the session), and answers any extension method ``_…`` with the method name and
params it received.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import uuid
from typing import Any, cast

import acp
import acp.agent.connection
from acp.agent.router import build_agent_router
from acp.meta import AGENT_METHODS
from acp.schema import (
    AgentCapabilities,
    AgentPlanUpdate,
    CloseSessionResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PlanEntry,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
)
from pydantic import ValidationError

log = logging.getLogger("plan_agent")


def _router_with_delete(agent: Any, use_unstable_protocol: bool = False) -> Any:
    """SDK 0.12.1 knows ``session/delete``'s schema but routes no handler to it: add the route."""
    router = build_agent_router(agent, use_unstable_protocol=use_unstable_protocol)
    router.route_request(AGENT_METHODS["session_delete"], DeleteSessionRequest, agent, "delete_session")
    return router


acp.agent.connection.build_agent_router = _router_with_delete


def _typed_entries(entries: list[Any]) -> list[PlanEntry] | None:
    """The entries as SDK models, or None if any is outside ACP's schema."""
    try:
        return [PlanEntry.model_validate(entry) for entry in entries]
    except ValidationError:
        return None


class PlanAgent:
    """A plain class (not a subclass of ``acp.Agent``), so unimplemented methods answer -32601."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._last_plans: dict[str, list[Any] | dict[str, Any]] = {}

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                session_capabilities=SessionCapabilities(
                    close=SessionCloseCapabilities(), delete=SessionDeleteCapabilities()
                ),
            ),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        # The SDK passes the request's ``_meta`` entries as keyword arguments.
        return NewSessionResponse(session_id=kwargs.get("wantedSessionId") or f"sess-{uuid.uuid4().hex}")

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        if (plan := self._last_plans.get(session_id)) is not None:
            await self._send_plan(session_id, plan)
        return LoadSessionResponse()

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        return CloseSessionResponse()

    async def delete_session(self, session_id: str, **kwargs: Any) -> DeleteSessionResponse:
        self._last_plans.pop(session_id, None)
        return DeleteSessionResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        try:
            command = json.loads(text)
        except ValueError:
            command = {}
        for plan in command.get("plans", []):
            await self._send_plan(session_id, plan)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"method": method, "params": params}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def _send_plan(self, session_id: str, plan: list[Any] | dict[str, Any]) -> None:
        if isinstance(plan, dict) and ("planUpdate" in plan or "planRemoved" in plan):
            operation = (
                {"sessionUpdate": "plan_update", "plan": plan["planUpdate"]}
                if "planUpdate" in plan
                else {"sessionUpdate": "plan_removed", "planId": plan["planRemoved"]}
            )
            await self._conn._conn.send_notification("session/update", {"sessionId": session_id, "update": operation})
            return
        self._last_plans[session_id] = plan
        entries, meta = (plan["entries"], plan.get("_meta")) if isinstance(plan, dict) else (plan, None)
        typed = _typed_entries(entries)
        if typed is not None:
            update = AgentPlanUpdate(session_update="plan", entries=typed, field_meta=meta)
            await self._conn.session_update(session_id=session_id, update=update)
        else:
            raw = {"sessionUpdate": "plan", "entries": entries}
            await self._conn._conn.send_notification("session/update", {"sessionId": session_id, "update": raw})


async def main() -> None:
    # A plain class on purpose (see PlanAgent), so it is not an ``acp.Agent`` to the type checker.
    await acp.run_agent(cast(acp.Agent, PlanAgent()), use_unstable_protocol=True)


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    asyncio.run(main())
