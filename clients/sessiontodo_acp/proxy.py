"""The transparent ACP stdio proxy that mirrors plans (started by ``sessiontodo_acp.launch``).

The editor runs the proxy as its agent; the proxy runs the real agent and copies every line
both ways byte for byte (unknown methods and fields included). It only *reads* the traffic:
what it sees is handed to a ``PlanSync``, which keeps sessiontodo and the editor's plan in
step, both ways. The plan sync (gRPC, the ACP SDK) is loaded in the background while forwarding already
runs, so neither its start-up nor sessiontodo being down ever holds up the conversation.
stdout carries nothing but protocol; logs go to stderr. The proxy exits with the agent's code.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from sessiontodo_acp._lines import ByteWriter, LineOutput, Oversized, parse, read_line, refusal
from sessiontodo_acp._signals import FORWARDED_SIGNALS
from sessiontodo_acp.settings import ProxySettings

if TYPE_CHECKING:
    from sessiontodo_acp._plan_sync import PlanSync
    from sessiontodo_client import TodoClient

log = logging.getLogger("sessiontodo_acp.proxy")

_KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when the agent has to be stopped."""
_TAIL_TIMEOUT = 2.0
"""Seconds to finish forwarding the agent's output after it exited (a grandchild may hold the pipe)."""
WATCH_RECONNECT_MAX = 0.3
"""Longest wait, in seconds, before a watch (and the channel) tries sessiontodo again after losing it."""
WRITE_READY_TIMEOUT = 0.5
"""Longest wait, in seconds, of one write for a channel that is not connected: then it fails, and its job retries
(or gives way to a newer plan or a removal queued behind it)."""
_BACKLOG_LIMIT = 10_000
"""Messages kept for the plan sync while it loads; beyond that they are forwarded unobserved."""


class Agent:
    """The agent process (started by the launcher): signals to its whole process group, an awaitable exit."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def signal(self, signum: int) -> None:
        """Signal the agent's process group (it leads its own session), unless it has exited."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass

    async def wait(self) -> int:
        """Wait for the agent to exit without a thread where Linux allows (a pidfd), and return its code."""
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(self.process.pid)
        except (AttributeError, OSError):
            return await asyncio.to_thread(self.process.wait)
        exited: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(pidfd, readable)
        try:
            await exited
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        return self.process.wait()


class AcpPlanProxy:
    """Forwards an editor's and an agent's JSON-RPC lines unchanged, feeding what it sees to a ``PlanSync``."""

    def __init__(
        self,
        agent: Agent,
        editor: tuple[asyncio.StreamReader, ByteWriter],
        agent_pipes: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        settings: ProxySettings,
    ) -> None:
        self._agent = agent
        self._editor_input, editor_output = editor
        self._agent_output, self._agent_input_writer = agent_pipes
        self._to_editor = LineOutput(editor_output)
        self._to_agent = LineOutput(self._agent_input_writer)
        self._settings = settings
        self._plan_sync: PlanSync | None = None
        self._todos: TodoClient | None = None
        self._backlog: list[tuple[bool, dict[str, Any]]] | None = []
        """What was seen while the plan sync loads; None if it could not start."""

    async def run(self) -> int:
        """Proxy until the agent exits; returns its exit code (128 + N when killed by signal N)."""
        starting = asyncio.create_task(self._start_plan_sync(), name="plan sync start-up")
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
            self._agent.signal(signal.SIGKILL)
            await exited
            await self._stop_plan_sync(starting)
        code = exited.result()
        log.info("the agent exited with code %d", code)
        return 128 - code if code < 0 else code

    async def _start_plan_sync(self) -> None:
        """Load gRPC and the ACP SDK off the event loop, connect (lazily), then observe from the backlog on."""
        try:
            await self._load_plan_sync()
        except ValueError as error:  # settings the client refuses, such as a token in plaintext to another host
            self._backlog = None
            log.error("not mirroring plans: %s; forwarding only", error)
        except Exception:
            self._backlog = None
            log.exception("could not start mirroring plans; forwarding only")

    async def _load_plan_sync(self) -> None:
        await asyncio.to_thread(importlib.import_module, "sessiontodo_acp._plan_sync")
        from sessiontodo_acp._plan_sync import PlanSync
        from sessiontodo_client import TodoClient

        policy = self._settings.retry_policy()
        # The plan sync's jobs retry (one policy per job); the client itself must not retry under them. Its
        # policy only paces the watches' reconnections (and the channel's): kept short, so that the editor
        # sees changes made elsewhere within a second of sessiontodo coming back, whatever retry_max says.
        reconnect = min(policy.maximum, WATCH_RECONNECT_MAX)
        self._todos = TodoClient.connect(
            self._settings.sessiontodo_address,
            retry=dataclasses.replace(policy, attempts=1, initial=min(policy.initial, reconnect), maximum=reconnect),
            security=self._settings.channel_security(),
            ready_timeout=WRITE_READY_TIMEOUT,  # the jobs retry: a write must not sit 10 s on a channel that is down
        )
        plan_sync = PlanSync(self._todos, self._to_editor, policy, idle_ttl=self._settings.session_idle_ttl())
        backlog, self._backlog = self._backlog or [], []
        for from_agent, message in backlog:  # synchronously: nothing can slip in between
            self._observe(plan_sync, from_agent, message)
        self._plan_sync = plan_sync
        log.info("plans go to sessiontodo at %s", self._settings.sessiontodo_address)

    async def _stop_plan_sync(self, starting: asyncio.Task[None]) -> None:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        if self._plan_sync is not None:
            await self._plan_sync.aclose(self._settings.drain_timeout)
        if self._todos is not None:
            await self._todos.close()

    async def _stop_agent(self, exited: asyncio.Task[int]) -> None:
        """Close the agent's input, then terminate it if it does not exit in time, then kill it."""
        self._close_agent_input()
        for signum, timeout in ((None, self._settings.agent_exit_timeout), (signal.SIGTERM, _KILL_GRACE)):
            if signum is not None:
                log.warning("the agent did not exit; sending %s", signal.Signals(signum).name)
                self._agent.signal(signum)
            try:
                await asyncio.wait_for(asyncio.shield(exited), timeout)
                return
            except TimeoutError:
                continue
        log.warning("the agent ignored SIGTERM; sending SIGKILL")
        self._agent.signal(signal.SIGKILL)
        await exited

    def _observe(self, plan_sync: PlanSync | None, from_agent: bool, message: dict[str, Any]) -> None:
        """Hand a message to the plan sync (or its backlog while it loads); never stops forwarding."""
        if plan_sync is None:
            if self._backlog is not None and len(self._backlog) < _BACKLOG_LIMIT:
                self._backlog.append((from_agent, message))
            return
        try:
            (plan_sync.from_agent if from_agent else plan_sync.from_editor)(message)
        except Exception:
            log.exception("could not act on a message; forwarded it unchanged")

    def _close_agent_input(self) -> None:
        if not self._agent_input_writer.is_closing():
            self._agent_input_writer.close()

    async def _forward(
        self, source: asyncio.StreamReader, target: LineOutput, sender: LineOutput, from_agent: bool
    ) -> None:
        """Copy ``source``'s lines to ``target`` whole, observing each; refuse over-long ones to ``sender``."""
        while line := await read_line(source):
            if isinstance(line, Oversized):
                limit = self._settings.max_line_bytes
                sender_name = "agent" if from_agent else "editor"
                log.error("refused a %d-byte message from the %s (limit %d)", line.size, sender_name, limit)
                with contextlib.suppress(OSError, RuntimeError):
                    async with sender.exclusive():
                        await sender.write_message(refusal(line.size, limit))
                continue
            async with target.exclusive():
                if (message := parse(line)) is not None:
                    self._observe(self._plan_sync, from_agent, message)
                await target.write(line)

    async def _editor_to_agent(self) -> None:
        """Copy the editor's lines to the agent until the editor closes its side, then close the agent's input."""
        try:
            await self._forward(self._editor_input, self._to_agent, self._to_editor, from_agent=False)
            log.info("the editor closed its side of the connection")
        except (BrokenPipeError, ConnectionResetError):
            log.info("the agent closed its input")
        finally:
            self._close_agent_input()

    async def _agent_to_editor(self) -> None:
        """Copy the agent's lines to the editor, each whole under the output lock (the plan sync writes there too)."""
        await self._forward(self._agent_output, self._to_editor, self._to_agent, from_agent=True)


# Standard streams


class _FileWriter:
    """Writes to a regular file (``> out.ndjson``) or ``/dev/null``, which never block for long, so plain writes do."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    async def drain(self) -> None:
        return None


async def _feed_from_file(fd: int, reader: asyncio.StreamReader) -> None:
    """Feed a regular file (``< requests.ndjson``) or ``/dev/null`` to ``reader``: the event loop cannot watch them."""
    while chunk := await asyncio.to_thread(os.read, fd, 1 << 16):
        reader.feed_data(chunk)
    reader.feed_eof()


def _pollable(fd: int, events: int) -> bool:
    """Whether the event loop can watch ``fd`` (pipes, sockets, ttys); epoll refuses regular files and
    ``/dev/null``, which are read and written directly instead."""
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, events)
        except (OSError, ValueError):
            return False
    return True


async def _pipe_writer(pipe: IO[bytes]) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def _pipe_reader(pipe: IO[bytes], limit: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=limit)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return reader


@contextlib.asynccontextmanager
async def editor_stdio(protocol_output_fd: int, limit: int) -> AsyncIterator[tuple[asyncio.StreamReader, ByteWriter]]:
    """The editor's ends: stdin as a reader, the protocol output as a writer (pipes, sockets, ttys, files…)."""
    feeder: asyncio.Task[None] | None = None
    if not _pollable(sys.stdin.fileno(), selectors.EVENT_READ):
        reader = asyncio.StreamReader(limit=limit)
        feeder = asyncio.create_task(_feed_from_file(sys.stdin.fileno(), reader))
    else:
        reader = await _pipe_reader(sys.stdin.buffer, limit)
    writer: ByteWriter
    if not _pollable(protocol_output_fd, selectors.EVENT_WRITE):
        writer = _FileWriter(protocol_output_fd)
    else:
        writer = await _pipe_writer(os.fdopen(protocol_output_fd, "wb", buffering=0))
    try:
        yield reader, writer
    finally:
        if feeder is not None:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)


async def serve(
    settings: ProxySettings, agent: subprocess.Popen[bytes], received: list[int], protocol_output_fd: int
) -> int:
    """Take over the signals, connect the editor's stdio and the agent's pipes, proxy until the agent exits."""
    running = Agent(agent)
    loop = asyncio.get_running_loop()
    for signum in FORWARDED_SIGNALS:
        loop.add_signal_handler(signum, running.signal, signum)
    if received:
        running.signal(received[-1])
    assert agent.stdin is not None
    assert agent.stdout is not None
    agent_pipes = await _pipe_reader(agent.stdout, settings.max_line_bytes), await _pipe_writer(agent.stdin)
    async with editor_stdio(protocol_output_fd, settings.max_line_bytes) as editor:
        log.info("proxying %s", agent.args)
        return await AcpPlanProxy(running, editor, agent_pipes, settings).run()


def run(agent: subprocess.Popen[bytes], flags: Sequence[str], received: list[int], protocol_output_fd: int) -> int:
    """Read the settings (stopping the already started agent if they are invalid) and proxy."""
    try:
        settings = ProxySettings.from_flags(flags)
    except BaseException:
        _kill(agent)
        raise
    logging.basicConfig(
        stream=sys.stderr,
        level=settings.log_level.upper(),
        format="%(asctime)s sessiontodo-acp-proxy %(levelname)s %(name)s: %(message)s",
    )
    try:
        return asyncio.run(serve(settings, agent, received, protocol_output_fd))
    except Exception as error:  # one line, unless the operator asked for the traceback
        if settings.log_level.upper() == "DEBUG":
            raise
        log.critical("%s: %s (--log-level debug shows the traceback)", type(error).__name__, error)
        _kill(agent)
        return 1


def _kill(agent: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(agent.pid, signal.SIGKILL)
    agent.wait()
