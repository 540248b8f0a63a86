"""The importer (``sessiontodo-opencode-mirror``) stays in step: after a reconnection OpenCode never
answers, and after another client changed an imported session in sessiontodo.

OpenCode is in memory (``httpx.MockTransport``), with an event stream the test feeds frame by frame;
sessiontodo is a real server. The real OpenCode drives the importer in tests/peers/opencode_real/.
"""

from __future__ import annotations

import pytest

from sessiontodo_client import Todo, TodoClient
from tests.peers.opencode.fake_opencode import CONNECTED, FakeOpenCode, frame, holds, importing, session
from tests.peers.opencode.opencode_support import todos
from tests.support import eventually

BOUND = 30.0
"""Seconds a check may take on a loaded machine; far below the silence timeout, which a hang would need."""


async def test_a_reconnection_opencode_never_answers_is_made_again_and_the_lists_are_read_again(
    client: TodoClient, caplog: pytest.LogCaptureFixture
) -> None:
    opencode = FakeOpenCode("stream", "hang")
    async with importing(client, opencode, connected_deadline=0.3):
        opencode.frames.put_nowait(CONNECTED)
        opencode.frames.put_nowait(frame("session.created", sessionID="ses_a", info=session("ses_a")))
        opencode.write("ses_a", "before the restart")
        await eventually(holds(client, "ses_a", "before the restart"), timeout=BOUND)

        opencode.frames.put_nowait(None)  # OpenCode restarts: its stream ends, the next connection hangs
        opencode.lists["ses_a"] = todos("written while restarting")  # todo.updated is not replayed
        opencode.frames.put_nowait(CONNECTED)  # for the connection after the hung one

        await eventually(holds(client, "ses_a", "written while restarting"), timeout=BOUND)

    assert opencode.connects >= 3
    assert "interrupted: no server.connected within 0.3s; reconnecting" in caplog.text


async def test_a_list_equal_to_the_one_imported_is_written_again_after_another_client_changed_it(
    client: TodoClient,
) -> None:
    opencode = FakeOpenCode()
    async with importing(client, opencode) as importer:
        opencode.frames.put_nowait(CONNECTED)
        opencode.frames.put_nowait(frame("session.created", sessionID="ses_a", info=session("ses_a")))
        opencode.write("ses_a", "the model's plan")
        await eventually(holds(client, "ses_a", "the model's plan"), timeout=BOUND)
        elsewhere = await client.replace_todos("ses_a", [Todo(content="changed elsewhere")], origin="board")
        await eventually(lambda: importer.held_revision("ses_a") == elsewhere.revision, timeout=BOUND)

        opencode.write("ses_a", "the model's plan")  # the model writes its list again, unchanged

        await eventually(holds(client, "ses_a", "the model's plan"), timeout=BOUND)


async def test_an_unchanged_list_sessiontodo_holds_is_not_written_again(client: TodoClient) -> None:
    opencode = FakeOpenCode()
    async with importing(client, opencode):
        opencode.frames.put_nowait(CONNECTED)
        opencode.frames.put_nowait(frame("session.created", sessionID="ses_a", info=session("ses_a")))
        opencode.write("ses_a", "plan")
        await eventually(holds(client, "ses_a", "plan"), timeout=BOUND)
        first = (await client.get_todos("ses_a")).revision
        opencode.write("ses_a", "plan")
        opencode.write("ses_b", "marker")  # applied after the repeat, in order
        await eventually(holds(client, "ses_b", "marker"), timeout=BOUND)

    assert (await client.get_todos("ses_a")).revision == first


async def test_a_session_whose_server_label_another_client_removed_is_no_longer_held(client: TodoClient) -> None:
    opencode = FakeOpenCode()
    async with importing(client, opencode) as importer:
        opencode.frames.put_nowait(CONNECTED)
        opencode.frames.put_nowait(frame("session.created", sessionID="ses_a", info=session("ses_a")))
        opencode.write("ses_a", "plan")
        await eventually(holds(client, "ses_a", "plan"), timeout=BOUND)

        await client.update_session("ses_a", remove_labels=["opencode.server"], origin="board")

        await eventually(lambda: importer.held_revision("ses_a") is None, timeout=BOUND)
