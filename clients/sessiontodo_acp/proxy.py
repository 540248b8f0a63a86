"""``sessiontodo-acp-proxy -- <agent command…>``: a transparent ACP stdio proxy that mirrors plans.

The editor runs the proxy as its agent; the proxy runs the real agent and copies every line
both ways byte for byte (unknown methods and fields included). It only *reads* the traffic:
sessions the agent opens become sessiontodo sessions, plans the agent sends are stored,
changes made to a session by anyone else are shown to the editor as plan updates, and a
closed session is removed. sessiontodo being down never holds up the conversation. stdout
carries nothing but protocol; logs go to stderr. The proxy exits with the agent's exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from sessiontodo_acp._mirror import ByteWriter, EditorOutput, PlanMirror
from sessiontodo_acp.settings import ProxySettings
from sessiontodo_client import TodoClient

log = logging.getLogger("sessiontodo_acp.proxy")

_KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when the agent has to be stopped."""
_TAIL_TIMEOUT = 2.0
"""Seconds to finish forwarding the agent's output after it exited (a grandchild may hold the pipe)."""


async def _read_piece(reader: asyncio.StreamReader) -> tuple[bytes, bool]:
    """The next line, or a piece of one longer than the reader's limit; ``(b"", True)`` at the end.

    The flag says whether the piece ends a line (or the stream).
    """
    try:
        return await reader.readuntil(b"\n"), True
    except asyncio.IncompleteReadError as end:
        return end.partial, True
    except asyncio.LimitOverrunError as overrun:
        return await reader.readexactly(overrun.consumed), False


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def signal_agent(agent: asyncio.subprocess.Process, signum: int) -> None:
    """Signal the agent, and its whole process group when it leads one (as ``serve`` starts it)."""
    if agent.returncode is not None:
        return
    try:
        if os.getpgid(agent.pid) == agent.pid:
            os.killpg(agent.pid, signum)
        else:
            agent.send_signal(signum)
    except ProcessLookupError:
        pass


class AcpPlanProxy:
    """Forwards an editor's and an agent's JSON-RPC lines unchanged, feeding what it sees to a ``PlanMirror``."""

    def __init__(
        self,
        agent: asyncio.subprocess.Process,
        editor_input: asyncio.StreamReader,
        editor_output: ByteWriter,
        todos: TodoClient,
        settings: ProxySettings,
    ) -> None:
        if agent.stdin is None or agent.stdout is None:
            raise ValueError("the agent needs piped stdin and stdout")
        self._agent = agent
        self._agent_input = agent.stdin
        self._agent_output = agent.stdout
        self._editor_input = editor_input
        self._output = EditorOutput(editor_output)
        self._settings = settings
        self._mirror = PlanMirror(todos, self._output, settings.backoff())

    async def run(self) -> int:
        """Proxy until the agent exits; returns its exit code (128 + N when killed by signal N)."""
        to_agent = asyncio.create_task(self._editor_to_agent(), name="editor->agent")
        to_editor = asyncio.create_task(self._agent_to_editor(), name="agent->editor")
        exited = asyncio.create_task(self._agent.wait(), name="agent exit")
        try:
            await asyncio.wait({to_agent, to_editor, exited}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                await self._stop_agent(exited)
            try:
                await asyncio.wait_for(asyncio.shield(to_editor), _TAIL_TIMEOUT)
            except TimeoutError:
                log.warning("the agent's output pipe is still open after it exited; stop forwarding it")
            except OSError as error:
                log.warning("the editor stopped reading: %s", error)
        finally:
            for task in (to_agent, to_editor):
                task.cancel()
            for task, outcome in zip(
                (to_agent, to_editor), await asyncio.gather(to_agent, to_editor, return_exceptions=True), strict=True
            ):
                if isinstance(outcome, Exception) and not isinstance(outcome, OSError):
                    log.error("forwarding %s failed", task.get_name(), exc_info=outcome)
            if self._agent.returncode is None:
                signal_agent(self._agent, signal.SIGKILL)
            await exited
            await self._mirror.aclose(self._settings.drain_timeout)
        code = exited.result()
        log.info("the agent exited with code %d", code)
        return 128 - code if code < 0 else code

    async def _stop_agent(self, exited: asyncio.Task[int]) -> None:
        """Close the agent's input, then terminate it if it does not exit in time, then kill it."""
        self._close_agent_input()
        for signum, timeout in ((None, self._settings.agent_exit_timeout), (signal.SIGTERM, _KILL_GRACE)):
            if signum is not None:
                log.warning("the agent did not exit; sending %s", signal.Signals(signum).name)
                signal_agent(self._agent, signum)
            try:
                await asyncio.wait_for(asyncio.shield(exited), timeout)
                return
            except TimeoutError:
                continue
        log.warning("the agent ignored SIGTERM; sending SIGKILL")
        signal_agent(self._agent, signal.SIGKILL)
        await exited

    @staticmethod
    def _observe(observer: Callable[[dict[str, Any]], None], message: dict[str, Any]) -> None:
        """Observing must never stop forwarding: a message the mirror cannot handle is logged and passed on."""
        try:
            observer(message)
        except Exception:
            log.exception("could not act on a message; forwarded it unchanged")

    def _close_agent_input(self) -> None:
        if not self._agent_input.is_closing():
            self._agent_input.close()

    async def _editor_to_agent(self) -> None:
        """Copy the editor's lines to the agent until the editor closes its side, then close the agent's input."""
        try:
            while True:
                piece, ends_line = await _read_piece(self._editor_input)
                if not piece:
                    log.info("the editor closed its side of the connection")
                    return
                if ends_line and (message := _parse(piece)) is not None:
                    self._observe(self._mirror.from_editor, message)
                self._agent_input.write(piece)
                await self._agent_input.drain()
        except (BrokenPipeError, ConnectionResetError):
            log.info("the agent closed its input")
        finally:
            self._close_agent_input()

    async def _agent_to_editor(self) -> None:
        """Copy the agent's lines to the editor, each whole under the output lock, observing each whole line."""
        while True:
            piece, ends_line = await _read_piece(self._agent_output)
            if not piece:
                return
            async with self._output.exclusive():
                if ends_line and (message := _parse(piece)) is not None:
                    self._observe(self._mirror.from_agent, message)
                elif not ends_line:
                    log.warning(
                        "a message from the agent is longer than %d bytes: forwarded unobserved",
                        self._settings.max_line_bytes,
                    )
                await self._output.write(piece)
                while not ends_line:
                    piece, ends_line = await _read_piece(self._agent_output)
                    await self._output.write(piece)


# Command line


def parse_arguments(argv: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Split ``[options] -- agent command…`` into settings overrides and the agent command."""
    parser = argparse.ArgumentParser(
        prog="sessiontodo-acp-proxy",
        description="Run an ACP agent behind a transparent stdio proxy that keeps its session plans in sessiontodo.",
        epilog="Every option can also be set as SESSIONTODO_ACP_<OPTION> in the environment.",
    )
    parser.add_argument("--address", help="host:port of the sessiontodo gRPC service (default 127.0.0.1:50051)")
    parser.add_argument("--log-level", help="logging level for stderr (default INFO)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- followed by the agent command and its arguments")
    arguments = parser.parse_args(argv)
    command = list(arguments.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("give the agent command after --, e.g. sessiontodo-acp-proxy -- my-agent --acp")
    overrides = {name: value for name in ("address", "log_level") if (value := getattr(arguments, name)) is not None}
    return overrides, command


class _FileWriter:
    """Writes to a regular file (``> out.ndjson``), which never blocks for long, so plain writes do."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    async def drain(self) -> None:
        return None


async def _feed_from_file(fd: int, reader: asyncio.StreamReader) -> None:
    """Feed a regular file (``< requests.ndjson``) to ``reader``: event-loop pipes refuse regular files."""
    while chunk := await asyncio.to_thread(os.read, fd, 1 << 16):
        reader.feed_data(chunk)
    reader.feed_eof()


def _is_regular_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


@contextlib.asynccontextmanager
async def editor_stdio(protocol_output_fd: int, limit: int) -> AsyncIterator[tuple[asyncio.StreamReader, ByteWriter]]:
    """The editor's ends: stdin as a reader, the protocol output as a writer (pipes, sockets, ttys or files)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    feeder: asyncio.Task[None] | None = None
    if _is_regular_file(sys.stdin.fileno()):
        feeder = asyncio.create_task(_feed_from_file(sys.stdin.fileno(), reader))
    else:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    writer: ByteWriter
    if _is_regular_file(protocol_output_fd):
        writer = _FileWriter(protocol_output_fd)
    else:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(protocol_output_fd, "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        yield reader, writer
    finally:
        if feeder is not None:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)


async def serve(settings: ProxySettings, command: list[str], protocol_output_fd: int) -> int:
    """Start the agent, connect the editor's stdio and sessiontodo, and proxy until the agent exits."""
    # Signals are caught before the agent exists, so that none can kill the proxy and orphan it.
    agents: list[asyncio.subprocess.Process] = []
    received: list[int] = []

    def forward(signum: int) -> None:
        received.append(signum)
        for agent in agents:
            signal_agent(agent, signum)

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, forward, signum)
    try:
        # The agent is started before any gRPC object exists: fork() after gRPC starts is unsupported.
        agent = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=settings.max_line_bytes,
            start_new_session=True,
        )
    except OSError as error:
        log.error("cannot start the agent %r: %s", command[0], error)
        return 127
    agents.append(agent)
    if received:
        signal_agent(agent, received[-1])
    async with (
        editor_stdio(protocol_output_fd, settings.max_line_bytes) as (editor_input, editor_output),
        TodoClient.connect(settings.address, retry=settings.backoff()) as todos,
    ):
        log.info("proxying %s; plans go to sessiontodo at %s", command, settings.address)
        return await AcpPlanProxy(agent, editor_input, editor_output, todos, settings).run()


def main(argv: Sequence[str] | None = None) -> None:
    overrides, command = parse_arguments(sys.argv[1:] if argv is None else argv)
    settings = ProxySettings(**overrides)
    logging.basicConfig(
        stream=sys.stderr,
        level=settings.log_level.upper(),
        format="%(asctime)s sessiontodo-acp-proxy %(levelname)s %(name)s: %(message)s",
    )
    # stdout is the protocol: keep a private handle on it and point fd 1 at stderr, so that a
    # stray print() anywhere in the process can never corrupt the JSON-RPC stream.
    protocol_output_fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.exit(asyncio.run(serve(settings, command, protocol_output_fd)))


if __name__ == "__main__":
    main()
