"""etcd 3.4 (Debian ``etcd-server``) as a competitor: its server process, and the few messages of
its gRPC API the bench speaks, without Go and without generated code.

The messages are declared here at run time, field numbers as in etcd's ``api/etcdserverpb/rpc.proto``
and ``api/mvccpb/kv.proto`` (only the fields used; protobuf skips the rest on the wire). The
service paths are etcd's own, so h2load and ``grpc.aio`` talk to the real server.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from processes import ServerProcess, free_port, pinned

PUT = "/etcdserverpb.KV/Put"
RANGE = "/etcdserverpb.KV/Range"
WATCH = "/etcdserverpb.Watch/Watch"

_T = descriptor_pb2.FieldDescriptorProto
_FIELDS: dict[str, list[tuple[str, int, int, str]]] = {
    # message: (field, number, type, message type or "")
    "ResponseHeader": [("cluster_id", 1, _T.TYPE_UINT64, ""), ("revision", 3, _T.TYPE_INT64, "")],
    "KeyValue": [
        ("key", 1, _T.TYPE_BYTES, ""),
        ("mod_revision", 3, _T.TYPE_INT64, ""),
        ("value", 5, _T.TYPE_BYTES, ""),
    ],
    "Event": [("type", 1, _T.TYPE_INT32, ""), ("kv", 2, _T.TYPE_MESSAGE, "KeyValue")],
    "PutRequest": [("key", 1, _T.TYPE_BYTES, ""), ("value", 2, _T.TYPE_BYTES, "")],
    "PutResponse": [("header", 1, _T.TYPE_MESSAGE, "ResponseHeader")],
    "RangeRequest": [("key", 1, _T.TYPE_BYTES, "")],
    "RangeResponse": [("header", 1, _T.TYPE_MESSAGE, "ResponseHeader")],
    "WatchCreateRequest": [("key", 1, _T.TYPE_BYTES, ""), ("start_revision", 3, _T.TYPE_INT64, "")],
    "WatchRequest": [("create_request", 1, _T.TYPE_MESSAGE, "WatchCreateRequest")],
    "WatchResponse": [
        ("header", 1, _T.TYPE_MESSAGE, "ResponseHeader"),
        ("watch_id", 2, _T.TYPE_INT64, ""),
        ("created", 3, _T.TYPE_BOOL, ""),
        ("canceled", 4, _T.TYPE_BOOL, ""),
        ("events", 11, _T.TYPE_MESSAGE, "Event"),
    ],
}


def _messages() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(name="bench_etcd.proto", package="benchetcd", syntax="proto3")
    for name, fields in _FIELDS.items():
        message = file.message_type.add(name=name)
        for field_name, number, field_type, type_name in fields:
            label = _T.LABEL_REPEATED if field_name == "events" else _T.LABEL_OPTIONAL
            field = message.field.add(name=field_name, number=number, type=field_type, label=label)
            if type_name:
                field.type_name = f".benchetcd.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"benchetcd.{name}")) for name in _FIELDS}


messages = _messages()
PutRequest = messages["PutRequest"]
PutResponse = messages["PutResponse"]
RangeRequest = messages["RangeRequest"]
RangeResponse = messages["RangeResponse"]
WatchRequest = messages["WatchRequest"]
WatchResponse = messages["WatchResponse"]


def etcd_binary() -> str | None:
    return shutil.which("etcd") or shutil.which("etcd", path="/usr/sbin:/usr/bin")


def put(channel: grpc.aio.Channel) -> Any:
    return channel.unary_unary(PUT, request_serializer=_serialize, response_deserializer=PutResponse.FromString)


def range_(channel: grpc.aio.Channel) -> Any:
    return channel.unary_unary(RANGE, request_serializer=_serialize, response_deserializer=RangeResponse.FromString)


def watch(channel: grpc.aio.Channel) -> Any:
    return channel.stream_stream(WATCH, request_serializer=_serialize, response_deserializer=WatchResponse.FromString)


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()


async def open_watch(channel: grpc.aio.Channel, key: bytes) -> grpc.aio.StreamStreamCall:
    """One Watch stream with one watcher of ``key``, created (etcd confirms before any event)."""
    call = watch(channel)()
    await call.write(WatchRequest(create_request={"key": key}))
    created = await asyncio.wait_for(call.read(), 30)
    if created is grpc.aio.EOF or not created.created:
        raise RuntimeError(f"etcd did not create the watch: {created}")
    return call


async def next_revision(call: grpc.aio.StreamStreamCall) -> int:
    """The mod revision of the next event on a watch stream."""
    while True:
        response = await asyncio.wait_for(call.read(), 30)
        if response is grpc.aio.EOF or response.canceled:
            raise RuntimeError("the etcd watch ended")
        if response.events:
            return int(response.events[-1].kv.mod_revision)


class EtcdProcess(ServerProcess):
    """A single-member etcd with its data in the run's scratch folder: it fsyncs its WAL before
    acknowledging a write, batching the writes that arrive meanwhile, as a real deployment does."""

    @classmethod
    def etcd(cls, name: str, cpus: set[int], scratch: Path) -> EtcdProcess:
        binary = etcd_binary()
        if binary is None:
            raise RuntimeError("etcd not found: apt-get install etcd-server (make bench does this)")
        port, peer = free_port(), free_port()
        argv = [
            binary, "--name", name, "--data-dir", str(scratch / f"{name}.etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{port}", "--advertise-client-urls", f"http://127.0.0.1:{port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"{name}=http://127.0.0.1:{peer}",
            "--logger", "zap", "--log-level", "warn", "--quota-backend-bytes", str(8 << 30),
        ]  # fmt: skip
        return cls(name, pinned(cpus, argv), port, scratch)

    async def _wait_until_answering(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.address) as channel:
            ranged = range_(channel)
            while True:
                try:
                    await ranged(RangeRequest(key=b"ready"), timeout=1)
                    return
                except grpc.aio.AioRpcError:
                    if not self.running or time.monotonic() > deadline:
                        raise RuntimeError(f"{self.name} did not start:\n{self.log_text()}") from None
                    await asyncio.sleep(0.1)
