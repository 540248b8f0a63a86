"""``python -m sessiontodo_server``: serve until SIGTERM or SIGINT, then shut down gracefully;
SIGHUP reloads the TLS certificate and the auth file.

What cannot start is one line on stderr: a wrong flag or value, a taken port or a store in use
exit with status 2 and say what to do; anything unexpected exits 1, with its traceback only under
``--log-level debug``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo_common.command_line import fail, parse_settings, run_command
from sessiontodo_common.stop_signals import stop_requested
from sessiontodo_server.app import ListenError, StartupError, start_server
from sessiontodo_server.domain.store import StoreInUseError, StoreStartupError
from sessiontodo_server.event_loop import loop_factory
from sessiontodo_server.observability.logs import configure_logging
from sessiontodo_server.settings import HELP_EXAMPLES, HELP_GROUPS, Settings

PROG = "sessiontodo-server"

YOUNG_COLLECTION_THRESHOLD = 10_000
"""Allocations between collections of the youngest generation (CPython's default: 700)."""


def settle_garbage_collector() -> None:
    """Keep CPython's cyclic collector off what lives for the whole run. Every write allocates
    dozens of objects, and the changes kept for resuming outlive the young collections, so full
    collections came often and walked everything the imports and the loaded store hold: 16-21%
    of the server's CPU per write. Frozen, that is never walked again; the larger young threshold
    makes every collection rarer. Most of the server's objects hold no cycles and are freed by
    reference counting anyway."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


async def serve(settings: Settings) -> None:
    running = await start_server(settings)
    settle_garbage_collector()  # once the store is loaded: its sessions live as long as the process
    stop = stop_requested()
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, running.reload)
    await stop.wait()
    await running.stop()


def _answers_grpc_health(address: str) -> bool:
    """Whether a gRPC server with health checking (a sessiontodo server, most likely) answers at ``address``."""
    with grpc.insecure_channel(address) as channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
        except grpc.RpcError as error:
            return error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        return True


def _taken_port(settings: Settings, error: ListenError) -> str:
    """The taken-port line, naming both ways out: stop the first server, or another port (and store)."""
    if not error.in_use:
        return f"{error}; set another address with --host/--port (SESSIONTODO_HOST/SESSIONTODO_PORT)"
    if _answers_grpc_health(f"{settings.host}:{settings.port}"):
        return (
            f"{error}: a sessiontodo server is already running there; stop it (Ctrl-C in its terminal), or start "
            "this one with another --port (SESSIONTODO_PORT) and its own --store"
        )
    return f"{error}; stop what uses that port, or pass another --port (SESSIONTODO_PORT)"


def _run(settings: Settings) -> None:
    """Serve; what stops the start is one line: status 2 when the flags can fix it, else 1."""
    try:
        with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
            runner.run(serve(settings))
    except ListenError as error:
        fail(PROG, _taken_port(settings, error))
    except StoreInUseError as error:
        fail(
            PROG,
            f"{error}: stop that server (Ctrl-C in its terminal), or give this one its own --store "
            "(e.g. sqlite:///data/second.db) and --port",
        )
    except ValueError as error:  # a store URL or --durability the stores refuse
        fail(PROG, f"{error} (--store / SESSIONTODO_STORE)")
    except (StoreStartupError, StartupError) as error:
        logging.getLogger("sessiontodo_server").critical("%s", error)
        sys.exit(1)


def main() -> None:
    settings = parse_settings(Settings, sys.argv[1:], prog=PROG, groups=HELP_GROUPS, examples=HELP_EXAMPLES)
    configure_logging(settings.log_level, settings.log_format)
    run_command(PROG, lambda: _run(settings), log_level=settings.log_level)


if __name__ == "__main__":
    main()
