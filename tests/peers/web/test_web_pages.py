"""Each page's bounded buffer and the SSE framing (pure: no server)."""

from __future__ import annotations

import pytest

from sessiontodo_web.models import FeedStatus
from sessiontodo_web.pages import PageStream, frame

WHOLE_BOARD = b"event: reset\ndata: {}\n\n"


def test_a_frame_carries_its_cursor_as_the_event_id() -> None:
    assert frame("feed", FeedStatus(state="live"), "epoch.7") == b'id: epoch.7\nevent: feed\ndata: {"state":"live"}\n\n'


def test_a_frame_without_a_cursor_has_no_id_line() -> None:
    assert frame("feed", FeedStatus(state="live")) == b'event: feed\ndata: {"state":"live"}\n\n'


def test_an_event_id_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValueError, match="line breaks"):
        frame("feed", FeedStatus(state="live"), "a\nid: forged")


async def test_frames_are_received_in_order_after_the_backlog() -> None:
    page = PageStream(4, lambda: WHOLE_BOARD, [b"1"])
    page.push(b"2")

    assert [await page.receive(), await page.receive()] == [b"1", b"2"]


async def test_a_page_that_falls_behind_gets_the_whole_board_once_instead_of_what_waited() -> None:
    page = PageStream(2, lambda: WHOLE_BOARD, [])
    for data in (b"1", b"2", b"3", b"4"):
        page.push(data)
    page_after = b"5"

    first = await page.receive()
    page.push(page_after)

    assert (first, await page.receive(), page.resets) == (WHOLE_BOARD, page_after, 1)


async def test_a_closed_page_receives_none() -> None:
    page = PageStream(2, lambda: WHOLE_BOARD, [b"1"])
    page.close()

    assert await page.receive() is None
