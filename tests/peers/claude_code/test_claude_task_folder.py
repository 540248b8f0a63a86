"""``sessiontodo_claude.folder`` against the real Claude Code CLI: what Claude writes reads back
whole, and what the folder writes — under Claude's locks, as Claude would — a running Claude
session sees at its next TaskList, with ids it never reuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessiontodo_claude.folder import TaskFolder
from sessiontodo_claude.tasks import Task
from tests.peers.claude_code.claude_cli import ClaudeCode, task_files
from tests.peers.claude_code.stub_anthropic import StubAnthropic

pytestmark = [pytest.mark.process, pytest.mark.slow]


async def test_the_folder_reads_every_field_claude_writes(tmp_path: Path, anthropic: StubAnthropic) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, "reading") as claude:
        await claude.run(
            ("TaskCreate", {"subject": "Write parser", "description": "Tokens first", "activeForm": "Writing parser"}),
            ("TaskCreate", {"subject": "Test parser", "description": "Edge cases", "metadata": {"points": 3}}),
            ("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"], "owner": "bob"}),
            ("TaskUpdate", {"taskId": "1", "status": "in_progress"}),
        )
    listing = await TaskFolder(claude.folder).read_all()
    assert listing.tasks == {
        "1": Task(
            id="1",
            subject="Write parser",
            description="Tokens first",
            active_form="Writing parser",
            status="in_progress",
            blocks=("2",),
        ),
        "2": Task(
            id="2",
            subject="Test parser",
            description="Edge cases",
            owner="bob",
            blocked_by=("1",),
            metadata={"points": 3},
        ),
    }


async def test_a_running_session_sees_what_the_folder_writes_at_its_next_task_list(
    tmp_path: Path, anthropic: StubAnthropic
) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, "writing") as claude:
        await claude.run(
            ("TaskCreate", {"subject": "Write parser", "description": ""}),
            ("TaskCreate", {"subject": "Drop the flag", "description": ""}),
        )
        folder = TaskFolder(claude.folder)
        made = await folder.create(Task(id="", subject="Review", description="", blocked_by=("1",)))
        await folder.update("1", {"subject": "Write the parser", "status": "in_progress", "owner": "alice"})
        assert await folder.delete("2")

        listed = await claude.task_list()
        (created,) = await claude.run(("TaskCreate", {"subject": "After the outside writes", "description": ""}))

    assert made.id == "3"
    assert listed.splitlines() == [
        "#1 [in_progress] Write the parser (alice)",
        "#3 [pending] Review [blocked by #1]",
    ]
    assert created == "Task #4 created successfully: After the outside writes"  # 2 is never given again
    files = task_files(claude.folder)
    assert sorted(files) == ["1", "3", "4"]
    assert files["1"]["blocks"] == ["3"]


async def test_claude_keeps_the_metadata_the_folder_wrote_when_it_updates_the_task(
    tmp_path: Path, anthropic: StubAnthropic
) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, "merging") as claude:
        await claude.run(("TaskCreate", {"subject": "Write parser", "description": ""}))
        await TaskFolder(claude.folder).update("1", {}, metadata={"sessiontodo.todo_id": "todo_1"})
        await claude.run(("TaskUpdate", {"taskId": "1", "status": "completed", "metadata": {"reviewed": True}}))
    (task,) = task_files(claude.folder).values()
    assert task["status"] == "completed"
    assert task["metadata"] == {"sessiontodo.todo_id": "todo_1", "reviewed": True}
