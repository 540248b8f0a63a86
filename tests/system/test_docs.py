"""The docs run as written: every shell and Python block of README.md and docs/*.md, in order.

Each document runs in one bash session, in the checkout, inside its own network and process
namespaces (``unshare``): the documented ports (50051, 4096, 6379…) are free there, and every
process a document starts ends with it (``--kill-child``: even when the runner gives up on a
command that never ends, or is itself stopped). The session's PATH lacks the venv, as a newcomer's does,
so a document must say how to get the venv's tools.

- ``sh``/``bash`` blocks: every command must succeed (exit 0).
- ``console`` blocks: ``$ command`` lines; the lines up to the next ``$`` are what the command
  prints (stdout and stderr), compared after normalising generated ids and times. Revisions are
  compared as shown: each document runs against its own fresh servers, so they are what a reader gets.
  A line ``...`` stands for any lines, ``…`` inside a line for any text. A command shown
  without output must succeed; one shown with output may fail (its output is the check).
- ``python`` blocks: written to a file and run with the ``python`` on the session's PATH, its
  stdin and stdout pipes (as an editor runs an ACP agent).
- Other blocks (``json``, ``js``, ``text``…) are not run.

Two markers, an HTML comment on the line just before a block's opening fence:

- ``<!-- doc-runner: background -->``: each command starts a server that the reader leaves
  running in another terminal; it runs in the background until the document ends, and the
  runner waits until it listens on a new port.
- ``<!-- doc-runner: skip -->``: never run (for what cannot run inside the suite, such as
  ``make test`` itself). Keep it rare.

Nothing a document runs may leave files in the checkout. After an intended change of output,
``SESSIONTODO_UPDATE_DOCS=1 make test ARGS=tests/system/test_docs.py`` writes what the commands printed
into the documents in place of outputs that no longer match (then review the diff).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.peer, pytest.mark.process]

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"sh", "bash", "shell"}
MARKER = re.compile(r"^<!--\s*doc-runner:\s*(\w+)\s*-->$")
COMMAND_TIMEOUT = 120.0
CLOSE_GRACE = 15.0
"""Seconds a document's bash gets to end by itself once its input is closed, before it is killed."""
SERVER_START_TIMEOUT = 90.0
VENV_BIN = str(Path(sys.executable).parent)


@dataclass
class Block:
    language: str
    lines: list[str]
    line_number: int  # of the opening fence, 1-based
    marker: str = ""


@dataclass
class Command:
    text: str
    expected: list[str] | None = None  # console output shown by the doc; None: not shown
    where: str = ""
    background: bool = False
    output_lines: tuple[int, int] = (0, 0)  # where the shown output is in the document: [start, end)


def blocks(markdown: str) -> list[Block]:
    """Fenced code blocks, with the marker on the line before each."""
    found: list[Block] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"^```(\w*)\s*$", lines[index])
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        marker = MARKER.match(lines[index - 1].strip()) if index else None
        found.append(Block(opening.group(1), lines[index + 1 : end], index + 1, marker.group(1) if marker else ""))
        index = end + 1
    return found


def is_complete(text: str) -> bool:
    """Whether ``text`` is whole shell commands (no open quote, here-document or continuation)."""
    if text.endswith("\\"):
        return False
    check = subprocess.run(["bash", "-n"], input=text + "\n", capture_output=True, text=True)
    return check.returncode == 0 and not check.stderr


def shell_commands(block: Block, where: str) -> list[Command]:
    """A block's commands: console ``$ `` lines with their output, or every command of a script."""
    console = block.language == "console"
    commands: list[Command] = []
    pending: list[str] = []
    for offset, line in enumerate(block.lines):
        if pending:
            pending.append(line)
        elif console and line.startswith("$ "):
            pending = [line[2:]]
        elif console and commands:
            if commands[-1].expected is None:
                commands[-1].output_lines = (block.line_number + offset, block.line_number + offset)
            commands[-1].expected = [*(commands[-1].expected or []), line]
            commands[-1].output_lines = (commands[-1].output_lines[0], block.line_number + offset + 1)
            continue
        elif not console and line.strip() and not line.lstrip().startswith("#"):
            pending = [line]
        else:
            continue
        if is_complete("\n".join(pending)):
            commands.append(Command("\n".join(pending), where=where, background=block.marker == "background"))
            pending = []
    assert not pending, f"{where}: unfinished command {pending}"
    for command in commands:
        if command.expected is not None and not "".join(command.expected).strip():
            command.expected = None
    return commands


# Normalisation: what differs from run to run, on both the documented and the actual output
# (never revisions: a document shows the ones its own commands make).
VARYING = [
    (re.compile(r"\b(todo|ses|evt)_[0-9a-f]{8,}(_[0-9a-f]+)?\b"), r"\1_…"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?"), "TIME"),
    (re.compile(r"\b1\d{12}\b"), "TIME"),  # milliseconds since 1970 (OpenCode's times)
]


def normalise(text: str) -> str:
    for pattern, replacement in VARYING:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")


def output_pattern(expected: list[str]) -> re.Pattern[str]:
    """``...`` lines match any lines, ``…`` any text within a line."""
    parts = []
    for line in normalise("\n".join(expected)).split("\n"):
        if line.strip() in ("...", "…"):
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("…")) + r"\n")
    return re.compile("".join(parts), re.DOTALL)


@dataclass
class Session:
    """One bash in fresh network and process namespaces, running a document's commands in order."""

    scratch: Path
    process: subprocess.Popen[str] = field(init=False)
    count: int = 0

    def __post_init__(self) -> None:
        path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != VENV_BIN)
        # A reader's shell: not this venv, and not the make running this suite (it exports
        # `make test ARGS=...`'s ARGS, which the documents' own make commands would pick up).
        outer = ("VIRTUAL_ENV", "PYTHONPATH", "ARGS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
        env = {k: v for k, v in os.environ.items() if k not in outer}
        env.update(PATH=path, TMPDIR=str(self.scratch))
        self.process = subprocess.Popen(
            # --kill-child: when unshare ends, its bash (the namespace's init) is killed, and with it
            # every process of the namespace, whatever the bash was doing.
            ["unshare", "--map-root-user", "--net", "--pid", "--kill-child", "--mount-proc", "bash", "--norc"],
            stdin=subprocess.PIPE,
            cwd=ROOT,
            env=env,
            text=True,
        )
        ready = self.scratch / "ready"
        self._send(f'set -m -o pipefail; ip link set lo up; __status=0; touch "{ready}"')
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not ready.exists():  # from here on, /proc/PID/net shows the session's own namespace
            assert time.monotonic() < deadline, "the namespaced bash did not start in time"
            assert self.process.poll() is None, "the namespaced bash exited before it started"
            time.sleep(0.02)

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def listening(self) -> int:
        """Listening TCP sockets in the session's network namespace."""
        count = 0
        for table in ("tcp", "tcp6"):
            rows = Path(f"/proc/{self.process.pid}/net/{table}").read_text().splitlines()[1:]
            count += sum(1 for row in rows if row.split()[3] == "0A")
        return count

    def run(self, command: Command) -> tuple[int | None, str]:
        """Run one command; (exit code, output). A background command returns once it listens."""
        self.count += 1
        script, output, status = (self.scratch / f"{self.count}.{suffix}" for suffix in ("sh", "out", "rc"))
        script.write_text(command.text + "\n")
        before = self.listening()
        # `(exit $__status)` hands the previous command's status to this one (for `echo $?`);
        # stdin is an empty pipe (not /dev/null, which asyncio cannot watch), as if nothing were typed.
        run = f'(exit $__status); source "{script}" < <(:) >"{output}" 2>&1; __status=$?; echo $__status >"{status}"'
        self._send(f"{{ {run}; }} & disown" if command.background else run)
        deadline = time.monotonic() + (SERVER_START_TIMEOUT if command.background else COMMAND_TIMEOUT)
        while time.monotonic() < deadline:
            if status.exists() and status.read_text().endswith("\n"):
                return int(status.read_text()), output.read_text()
            if command.background and self.listening() > before:
                return None, ""
            time.sleep(0.05)
        raise AssertionError(f"{command.where}: no end within its time limit: {command.text}\n{output.read_text()}")

    def close(self) -> None:
        """End the bash and every process the document started (a command still running included)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def runnable(document: Path) -> list[Command]:
    """Every command of a document, in order; Python blocks become ``python FILE`` commands."""
    commands: list[Command] = []
    for block in blocks(document.read_text()):
        where = f"{document.relative_to(ROOT)}:{block.line_number}"
        if block.marker == "skip":
            continue
        if block.language in SHELL_LANGUAGES or block.language == "console":
            commands += shell_commands(block, where)
        elif block.language == "python":
            name = f"{document.stem}-{block.line_number}.py"
            code = "\n".join(block.lines) + "\n"
            commands.append(
                Command(
                    f'cat > "$TMPDIR/{name}" <<\'PYTHON\'\n{code}PYTHON\npython "$TMPDIR/{name}" | cat', where=where
                )
            )
    return commands


def update(document: Path, replacements: list[tuple[tuple[int, int], str]]) -> None:
    """Write what the commands printed over the outputs a document shows."""
    lines = document.read_text().split("\n")
    for (start, end), output in sorted(replacements, reverse=True):
        blank_lines_after = end - start - len("\n".join(lines[start:end]).rstrip("\n").split("\n"))
        printed = [line.rstrip() for line in output.strip("\n").split("\n")]
        lines[start:end] = printed + [""] * blank_lines_after
    document.write_text("\n".join(lines))


def work_tree_files() -> set[str]:
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line[3:] for line in listed.splitlines() if "__pycache__" not in line}


@pytest.fixture(scope="module", autouse=True)
def namespaces() -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rn", "true"]).returncode != 0:
        pytest.skip("the doc runner needs unprivileged user and network namespaces (unshare -rn)")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("document", DOCS, ids=[str(doc.relative_to(ROOT)) for doc in DOCS])
def test_the_document_runs_as_written(document: Path, tmp_path: Path) -> None:
    before = work_tree_files()
    session = Session(tmp_path)
    failures: list[str] = []
    replacements: list[tuple[tuple[int, int], str]] = []
    try:
        for command in runnable(document):
            status, output = session.run(command)
            if command.background:
                assert status is None, f"{command.where}: the server ended (exit {status}):\n{output}"
            elif command.expected is not None:
                if not output_pattern(command.expected).fullmatch(normalise(output) + "\n"):
                    replacements.append((command.output_lines, output))
                    failures.append(
                        f"{command.where}: $ {command.text}\n--- documented\n"
                        + "\n".join(command.expected)
                        + f"\n--- printed (exit {status})\n{output}"
                    )
            elif status != 0:
                failures.append(f"{command.where}: $ {command.text}\nexit {status}:\n{output}")
    finally:
        session.close()
    if failures and os.environ.get("SESSIONTODO_UPDATE_DOCS") == "1":
        update(document, replacements)
    assert not failures, "\n\n".join(failures)
    assert work_tree_files() <= before, f"left in the checkout: {sorted(work_tree_files() - before)}"


# The runner itself


def process_tree(root: int) -> dict[int, str]:
    """``root`` and every process below it, as the host sees them: pid -> start time (told apart from a reused pid)."""
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            after_name = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        pid = int(stat.parent.name)
        children.setdefault(int(after_name[1]), []).append(pid)  # field 4: the parent
        started[pid] = after_name[19]  # field 22: the start time
    tree, pending = {}, [root]
    while pending:
        pid = pending.pop()
        if pid in started:
            tree[pid] = started[pid]
        pending += children.get(pid, [])
    return tree


def still_running(pid: int, start_time: str) -> bool:
    """Whether that process lives (a zombie, already dead, does not)."""
    try:
        after_name = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return after_name[19] == start_time and after_name[0] != "Z"


def test_a_documents_background_server_ends_with_its_session_even_when_a_command_never_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = Session(tmp_path)
    try:
        server = Command("exec python3 -m http.server --bind 127.0.0.1 0", where="server", background=True)
        assert session.run(server) == (None, "")
        monkeypatch.setattr(sys.modules[__name__], "COMMAND_TIMEOUT", 0.5)
        with pytest.raises(AssertionError, match="no end within its time limit"):
            session.run(Command("sleep 600", where="hang"))  # the runner gives up; the bash is still busy with it
        started = process_tree(session.process.pid)
        commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ") for pid in started}
    finally:
        monkeypatch.setattr(sys.modules[__name__], "CLOSE_GRACE", 0.5)
        session.close()

    assert any(b"http.server" in command for command in commands.values()), commands  # among what must end
    deadline = time.monotonic() + 10
    while running := [pid for pid, start_time in started.items() if still_running(pid, start_time)]:
        assert time.monotonic() < deadline, f"left running: {[commands.get(pid) for pid in running]}"
        time.sleep(0.05)
