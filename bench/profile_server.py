"""Where a server's CPU goes under h2load: py-spy samples a pinned server while ReplaceTodos(10)
(or a BatchWrite) runs, and the share of samples in each function is printed.

    python bench/profile_server.py                        # memory store, 10 s, top 40 functions
    python bench/profile_server.py --store sqlite --seconds 20 --top 60
    python bench/profile_server.py --echo                 # the bare echo floor, for comparison

Shares are of all samples of the server's threads (grpc's poller thread included), counted
inclusively: a function's share covers what it calls. ``--raw FILE`` keeps py-spy's collapsed stacks.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc

from loadgen import grpc_body, h2load
from processes import BENCH, CpuPlan, ServerProcess
from sessiontodo.v1 import todo_service_pb2 as pb
from throughput import Target, todo_list

STORES = {"memory": "memory://", "sqlite": "sqlite:///{scratch}/profile.db"}


_LINE = re.compile(r":\d+\)$")


def shares(collapsed: str) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    """Samples in all; per function (``name (file)``) the samples whose stack holds it, and those it is on top of."""
    total, inclusive, own = 0, collections.Counter[str](), collections.Counter[str]()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        samples = int(count)
        total += samples
        frames = [_LINE.sub(")", frame) for frame in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] += samples
        own[frames[-1]] += samples
    return total, inclusive, own


async def profile(server: ServerProcess, seconds: float, cpus: CpuPlan, raw: Path, native: bool) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        target = Target(server, channel)
        session_id = await target.fresh_session("profile")
        body = grpc_body(pb.ReplaceTodosRequest(session_id=session_id, todos=todo_list(10)))
        await h2load(server.address, "ReplaceTodos", body, cpus=cpus.load, duration=1.0)  # warm up
        spy = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(server.pid), "--rate", "500",
            "--duration", str(round(seconds)), "--format", "raw", "--threads", "--output", str(raw),
            *(["--native"] if native else ["--nonblocking"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        result = await h2load(server.address, "ReplaceTodos", body, cpus=cpus.load, duration=seconds + 1)
        await spy.wait()
        print(f"{result.rate:,.0f} req/s during the profile", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=sorted(STORES), default="memory")
    parser.add_argument("--echo", action="store_true", help="profile the bare echo floor instead")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--native", action="store_true", help="C frames too (grpc's Cython core, protobuf)")
    arguments = parser.parse_args()
    cpus = CpuPlan.of_this_machine()
    os.sched_setaffinity(0, cpus.load)
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as temporary:
        scratch = Path(temporary)
        if arguments.echo:
            server = ServerProcess.echo("echo", cpus.server, scratch)
        else:
            url = STORES[arguments.store].format(scratch=scratch)
            server = ServerProcess.sessiontodo(arguments.store, url, cpus.server, scratch)
        raw = arguments.raw or scratch / "profile.txt"

        async def run() -> None:
            await server.start()
            try:
                await profile(server, arguments.seconds, cpus, raw, arguments.native)
            finally:
                await server.stop()

        asyncio.run(run())
        total, inclusive, own = shares(raw.read_text())
    root = str(BENCH.parent) + "/"
    print(f"{total} samples; per function, the share of samples in it (inclusive) and on top (own):")
    for frame, samples in inclusive.most_common(arguments.top):
        print(f"{samples / total:6.1%} {own[frame] / total:6.1%}  {frame.replace(root, '')}")


if __name__ == "__main__":
    main()
