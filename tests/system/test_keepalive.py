"""Keepalive: clients pinging an idle connection as often as docs/operations.md allows keep it.

gRPC's defaults answer a client that pings more often than every 5 minutes with GOAWAY
(ENHANCE_YOUR_CALM, too_many_pings) after two early pings; the channel then leaves READY.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo_client.client import KEEPALIVE_TIME_MS
from sessiontodo_server.app import RunningServer
from sessiontodo_server.settings import Settings

DOCUMENTED_PING_INTERVAL_MS = 10_000
IDLE_SECONDS = 36.0  # three pings and some: the default policy sends GOAWAY at the third early ping


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_client_pinging_every_10_s_keeps_its_idle_connection(server: RunningServer) -> None:
    options = [
        ("grpc.keepalive_time_ms", DOCUMENTED_PING_INTERVAL_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),  # keep pinging although no data flows
    ]
    async with grpc.aio.insecure_channel(server.address, options=options) as channel:
        await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert channel.get_state() is grpc.ChannelConnectivity.READY

        # Any state change while idle means the connection went away (GOAWAY closes it).
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(channel.wait_for_state_change(grpc.ChannelConnectivity.READY), IDLE_SECONDS)
        assert channel.get_state() is grpc.ChannelConnectivity.READY


def test_the_typed_client_pings_no_more_often_than_the_server_accepts_by_default() -> None:
    minimum_ms = Settings.model_fields["min_client_ping_interval"].default * 1000
    assert KEEPALIVE_TIME_MS >= DOCUMENTED_PING_INTERVAL_MS >= minimum_ms
