"""Claude Code → sessiontodo latency: from the real CLI's Task tool call to the change on a WatchTodos stream.

The real Claude Code CLI (node_modules, as ``make test`` installs it) runs headless against the
stub Anthropic API of tests/peers/claude_code, which notes when each scripted tool call was sent
whole; ``sessiontodo-claude`` runs as its own process between Claude's task folder and an
in-memory sessiontodo server (another process); this process watches the session. A sample is
one TaskCreate or TaskUpdate (a new subject each), from the tool call's answer being written to
the first WatchTodos message that shows it: Claude running the tool, writing its file, inotify,
the bridge's pass and BatchWrite, and the watch's delivery.

    python bench/claude_code.py [--samples 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the CLI harness and stub of the Claude Code tests

from report import median, percentile  # noqa: E402
from sessiontodo_client import TodoClient  # noqa: E402
from tests.peers.claude_code.claude_cli import ClaudeCode  # noqa: E402
from tests.peers.claude_code.stub_anthropic import Step, StubAnthropic  # noqa: E402
from tests.support import ServerProcess  # noqa: E402

LIST = "bench"
SESSION = f"claude-{LIST}"
STEPS_PER_PROMPT = 20


def steps(samples: int) -> list[Step]:
    """Creates and renames, alternately: every step leaves a subject no message showed before."""
    script: list[Step] = []
    for number in range(1, samples + 1):
        if number % 2:
            script.append(("TaskCreate", {"subject": f"task {number}", "description": "bench"}))
        else:
            script.append(("TaskUpdate", {"taskId": str(number // 2), "subject": f"renamed {number}"}))
    return script


async def measure(samples: int) -> list[float]:
    """Milliseconds from each tool call to the first watch message showing it."""
    seen: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch, ServerProcess("--store", "memory://") as server:
        home = Path(scratch) / "home"
        with StubAnthropic() as api:
            flags = ["--list", LIST, "--claude-home", str(home), "--sessiontodo-address", server.address]
            bridge = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "sessiontodo_claude", *flags, "--log-level", "WARNING", cwd=ROOT
            )
            try:
                async with TodoClient.connect(server.address) as client, ClaudeCode(home, api, LIST) as claude:
                    while True:  # the bridge creates the session
                        try:
                            await client.get_session(SESSION)
                            break
                        except Exception:
                            await asyncio.sleep(0.05)

                    all_seen = asyncio.Event()

                    async def watch() -> None:
                        async for event in client.watch(SESSION):
                            now = time.time()
                            for todo in event.todos:
                                seen.setdefault(todo.content, now)
                            if len(seen) >= samples:
                                all_seen.set()

                    watching = asyncio.create_task(watch())
                    script = steps(samples)
                    for start in range(0, len(script), STEPS_PER_PROMPT):
                        await claude.run(*script[start : start + STEPS_PER_PROMPT])
                    with contextlib.suppress(TimeoutError):  # a create renamed in the same pass is never shown
                        await asyncio.wait_for(all_seen.wait(), 10)
                    watching.cancel()
                    answered = [(step, at) for step, at in api.answered if step[0] in ("TaskCreate", "TaskUpdate")]
            finally:
                bridge.terminate()
                await bridge.wait()
    subjects = {str(arguments["subject"]): at for (_, arguments), at in answered}
    return [(seen[subject] - at) * 1000 for subject, at in subjects.items() if subject in seen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    latencies = asyncio.run(measure(args.samples))
    print(
        f"Claude Code tool call -> WatchTodos, {len(latencies)} of {args.samples} samples: "
        f"p50 {median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms, max {max(latencies):.1f} ms"
    )


if __name__ == "__main__":
    main()
