"""``sessiontodo-acp-proxy [options] -- <agent command…>``: start the agent first, then the proxy.

The editor's ``initialize`` must not wait for the proxy: the agent is started before anything
heavy is imported (settings, gRPC, the ACP SDK), so its own start-up overlaps the proxy's, and
the proxy forwards from the first byte while sessiontodo is connected in the background. Only
the standard library's cheapest modules are imported here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from sessiontodo_acp._signals import FORWARDED_SIGNALS


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``[options] -- agent command…`` as (proxy flags, agent command); the agent's own flags stay its own."""
    arguments = list(argv)
    if "--" not in arguments:
        return arguments, []
    at = arguments.index("--")
    return arguments[:at], arguments[at + 1 :]


def main(argv: Sequence[str] | None = None) -> None:
    flags, command = split_command(sys.argv[1:] if argv is None else argv)
    if not command or "-h" in flags or "--help" in flags:
        from sessiontodo_acp.settings import ProxySettings

        ProxySettings.from_flags(flags)  # prints --help, or a usage error, and exits
        sys.stderr.write(
            "sessiontodo-acp-proxy: give the agent command after --, e.g. sessiontodo-acp-proxy -- my-agent --acp"
            " (--help lists the flags)\n"
        )
        sys.exit(2)
    # Until the proxy's event loop takes over, a signal is remembered (and passed to the agent
    # then) rather than killing the proxy and orphaning the agent in its own session.
    received: list[int] = []
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, lambda signum, frame: received.append(signum))
    # stdout is the protocol: keep a private handle on it and point fd 1 at stderr, so that a
    # stray print() anywhere in the process can never corrupt the JSON-RPC stream.
    protocol_output_fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        # Started before any gRPC object exists, too: fork() after gRPC starts is unsupported.
        agent = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    except OSError as error:
        sys.stderr.write(f"sessiontodo-acp-proxy: cannot start the agent {command[0]!r}: {error}\n")
        sys.exit(127)

    from sessiontodo_acp.proxy import run

    sys.exit(run(agent, flags, received, protocol_output_fd))


if __name__ == "__main__":
    main()
