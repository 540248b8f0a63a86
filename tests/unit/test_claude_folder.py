"""``sessiontodo_claude.folder``: Claude Code's locks, id allocation, deletes and half-written files,
on a temporary folder (the real CLI's view of the same writes is tests/peers/claude_code)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from sessiontodo_claude.folder import LockTimeout, TaskFolder
from sessiontodo_claude.tasks import NotATask, Task, task_id_of


def write_task(folder: Path, task_id: str, **fields: object) -> None:
    document: dict[str, object] = {"id": task_id, "subject": f"Task {task_id}", "description": "", "status": "pending"}
    document |= {"blocks": [], "blockedBy": []} | fields
    (folder / f"{task_id}.json").write_text(json.dumps(document, indent=2))


@pytest.fixture
def folder(tmp_path: Path) -> TaskFolder:
    tasks = TaskFolder(tmp_path / "tasks" / "list", lock_retries=3, read_retries=2)
    tasks.ensure()
    return tasks


async def test_a_new_task_takes_the_next_id_above_the_files_and_the_highwatermark(folder: TaskFolder) -> None:
    write_task(folder.path, "2")
    (folder.path / ".highwatermark").write_text("5")
    made = await folder.create(Task(id="", subject="Next"))
    assert made.id == "6"


async def test_a_delete_raises_the_highwatermark_and_strips_the_id_from_the_other_tasks(folder: TaskFolder) -> None:
    write_task(folder.path, "1", blocks=["2"])
    write_task(folder.path, "2", blockedBy=["1"], blocks=["3"])
    write_task(folder.path, "3", blockedBy=["2"])
    assert await folder.delete("2")
    listing = await folder.read_all()
    assert sorted(listing.tasks) == ["1", "3"]
    assert (listing.tasks["1"].blocks, listing.tasks["3"].blocked_by) == ((), ())
    assert folder.highwatermark() == 2
    assert (await folder.create(Task(id="", subject="After"))).id == "4"


async def test_links_are_written_on_both_sides(folder: TaskFolder) -> None:
    write_task(folder.path, "1")
    write_task(folder.path, "2")
    await folder.set_blocked_by("2", ["1"])
    listing = await folder.read_all()
    assert (listing.tasks["1"].blocks, listing.tasks["2"].blocked_by) == (("2",), ("1",))
    await folder.set_blocked_by("2", [])
    listing = await folder.read_all()
    assert (listing.tasks["1"].blocks, listing.tasks["2"].blocked_by) == ((), ())


async def test_an_update_merges_into_the_file_as_it_is_now_and_leaves_no_temporary_file(folder: TaskFolder) -> None:
    write_task(folder.path, "1", owner="bob", metadata={"points": 3, "tag": "x"})
    updated = await folder.update("1", {"status": "in_progress", "owner": None}, metadata={"tag": None, "k": "v"})
    assert updated == Task(id="1", subject="Task 1", status="in_progress", metadata={"points": 3, "k": "v"})
    assert sorted(os.listdir(folder.path)) == [".lock", "1.json"]


async def test_an_update_waits_for_claudes_task_lock(folder: TaskFolder) -> None:
    write_task(folder.path, "1")
    lock = folder.path / "1.json.lock"
    lock.mkdir()
    updating = asyncio.create_task(folder.update("1", {"subject": "Mine"}))
    await asyncio.sleep(0.02)
    assert not updating.done()
    lock.rmdir()
    assert (await updating) is not None
    assert not lock.exists()


async def test_a_lock_held_through_every_retry_is_a_timeout_and_writes_nothing(folder: TaskFolder) -> None:
    write_task(folder.path, "1")
    (folder.path / "1.json.lock").mkdir()
    with pytest.raises(LockTimeout):
        await folder.update("1", {"subject": "Mine"})
    assert (await folder.read("1")) == Task(id="1", subject="Task 1")


async def test_a_lock_left_by_a_dead_holder_is_taken_over(folder: TaskFolder) -> None:
    write_task(folder.path, "1")
    lock = folder.path / "1.json.lock"
    lock.mkdir()
    old = time.time() - 60
    os.utime(lock, (old, old))
    assert (await folder.update("1", {"subject": "Mine"})) is not None


async def test_a_half_written_file_is_read_again_until_it_parses(folder: TaskFolder) -> None:
    path = folder.path / "1.json"
    path.write_text('{"id": "1", "subj')

    async def finish_writing() -> None:
        await asyncio.sleep(0.005)
        write_task(folder.path, "1")

    reading = asyncio.create_task(folder.read("1"))
    await finish_writing()
    assert (await reading) == Task(id="1", subject="Task 1")


async def test_a_file_that_never_parses_is_unreadable_not_gone(folder: TaskFolder) -> None:
    write_task(folder.path, "1", status="blocked")  # a status Claude does not know: invisible to it too
    with pytest.raises(NotATask):
        await folder.read("1")
    listing = await folder.read_all()
    assert (listing.tasks, listing.unreadable) == ({}, frozenset({"1"}))


@pytest.mark.parametrize(
    ("name", "task_id"),
    [("7.json", "7"), (".highwatermark", None), (".lock", None), ("7.json.lock", None), (".7.json.ab12.tmp", None)],
)
def test_only_task_files_name_a_task(name: str, task_id: str | None) -> None:
    assert task_id_of(name) == task_id
