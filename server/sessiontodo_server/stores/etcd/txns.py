"""The pieces of etcd Txns the store builds: its operations and its compares."""

from __future__ import annotations

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_server.stores.etcd.keys import range_end


def put(key: bytes, value: bytes) -> pb.RequestOp:
    return pb.RequestOp(request_put=pb.PutRequest(key=key, value=value))


def delete(key: bytes, end: bytes = b"") -> pb.RequestOp:
    return pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=key, range_end=end))


def get(
    key: bytes, end: bytes = b"", *, count_only: bool = False, keys_only: bool = False, revision: int = 0
) -> pb.RequestOp:
    request = pb.RangeRequest(key=key, range_end=end, count_only=count_only, keys_only=keys_only, revision=revision)
    return pb.RequestOp(request_range=request)


def written_at(key: bytes, revision: int) -> pb.Compare:
    """``key`` was last written at ``revision`` (0: it does not exist)."""
    return pb.Compare(key=key, target=pb.Compare.MOD, result=pb.Compare.EQUAL, mod_revision=revision)


def absent(key: bytes) -> pb.Compare:
    return pb.Compare(key=key, target=pb.Compare.CREATE, result=pb.Compare.EQUAL, create_revision=0)


def exists(key: bytes) -> pb.Compare:
    return pb.Compare(key=key, target=pb.Compare.CREATE, result=pb.Compare.GREATER, create_revision=0)


def none_created_since(prefix: bytes, revision: int) -> pb.Compare:
    """No key starting with ``prefix`` was created after ``revision`` (an empty range compares as a
    missing key: created at 0)."""
    newer = pb.Compare(target=pb.Compare.CREATE, result=pb.Compare.LESS, create_revision=revision + 1)
    newer.key, newer.range_end = prefix, range_end(prefix)
    return newer
