"""Where an etcd store lives: its URL and its key layout.

Every key of one store starts with the prefix ``P`` (``sessiontodo/`` unless the URL's path
names another), so several deployments, and other applications, can share one cluster:

- ``P meta``: the feed epoch (names this store's numbering; a new one when the prefix is empty);
- ``P s/ID``: a session (``records.py``): its revision, metadata and whole list, and the change
  that made this version of it. Every change but a removal is a put of this key;
- ``P m/ID``: a removed session's last change (SESSION_REMOVED): its revision is where the id
  starts again if re-created, and its put is the removal's feed entry;
- ``P c/PARENT CHILD``: parent links (a space is in no session id, so one parent's children are
  one key range);
- ``P q/ID REQUEST``: AddTodo request ids and their results;
- ``P d/ID``: the idle-TTL deadline of a session that has one;
- ``P batch``: the batch record: every change of the last BatchWrite, in order (``records.py``);
  each batch overwrites it, and etcd's history keeps each one at its batch's revision;
- ``P b/TENANT\nREQUEST``: a BatchWrite's request id and outcomes, on a lease that keeps it for
  ``REQUEST_RETENTION_SECONDS`` at least;
- ``P count``, ``P t/TENANT``: how many sessions there are (the global list not counted), and how
  many each tenant has (its global list not counted; the default tenant's is ``P t/``): every
  creation and removal compares and updates them, so the session limits hold across replicas.

A tenant's session ``acme/ses_1`` is ``P s/acme/ses_1``: each tenant's sessions are one key
prefix. The feed cursor is etcd's revision (``events.py``): each write is one Txn, so one
revision; a Txn making several changes (a removal, a batch) numbers them within its revision.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

DEFAULT_PREFIX = "sessiontodo"
DEFAULT_PORT = 2379
MAX_REQUEST_BYTES = 1536 * 1024
"""etcd's default ``--max-request-bytes``: a larger write is refused before it is sent."""
REQUEST_HEADROOM = 4096
"""Bytes kept free of a write's ``MAX_REQUEST_BYTES`` for what etcd adds to it (its raft header)."""
MAX_TXN_OPS = 128
"""etcd's default ``--max-txn-ops``: compares, or operations, in one Txn; a batch needing more
is refused before it is sent."""


@dataclass(frozen=True, slots=True)
class EtcdLocation:
    """The members to talk to, how, and the prefix of every key."""

    endpoints: tuple[str, ...]
    """``host:port`` of each member; any of them serves every call."""
    prefix: str
    tls: bool = False
    ca: Path | None = None
    """PEM CA bundle the members' certificates are checked against (system roots when None)."""
    cert: Path | None = None
    """PEM client certificate chain, for members that require one (with ``key``)."""
    key: Path | None = None
    user: str = ""
    password: str = ""
    timeout: float = 5.0
    """Seconds a call to etcd may take before it fails as UNAVAILABLE."""
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_txn_ops: int = MAX_TXN_OPS


def parse_etcd_url(url: str) -> EtcdLocation:
    """``etcd[s]://[user:password@]host:port[,host:port…][/prefix][?ca=…&cert=…&key=…&timeout=…&max_txn_ops=…]``."""
    parts = urlsplit(url)
    if parts.scheme not in ("etcd", "etcds"):
        raise ValueError("an etcd store URL starts with etcd:// or etcds://")
    credentials, _, hosts = parts.netloc.rpartition("@")
    user, _, password = credentials.partition(":")
    endpoints = tuple(_endpoint(host) for host in hosts.split(",") if host)
    if not endpoints:
        raise ValueError("the etcd store URL needs at least one member: etcd://host:2379[,host:2379…]/prefix")
    prefix = parts.path.strip("/") or DEFAULT_PREFIX
    if not prefix.isprintable() or " " in prefix:
        raise ValueError(f"etcd key prefix must be printable, without spaces: {prefix!r}")
    query = dict(parse_qsl(parts.query))
    unknown = set(query) - {"ca", "cert", "key", "timeout", "max_request_bytes", "max_txn_ops"}
    if unknown:
        raise ValueError(f"unknown etcd store URL parameters: {', '.join(sorted(unknown))}")
    files = {name: Path(query[name]) if query.get(name) else None for name in ("ca", "cert", "key")}
    if (files["cert"] is None) != (files["key"] is None):
        raise ValueError("the etcd store URL's cert and key parameters go together")
    max_txn_ops = int(query.get("max_txn_ops", MAX_TXN_OPS))
    if max_txn_ops < MAX_TXN_OPS:
        raise ValueError(f"max_txn_ops is at least {MAX_TXN_OPS} (etcd's default; removals take that many)")
    tls = parts.scheme == "etcds"
    if not tls and any(files.values()):
        raise ValueError("ca, cert and key need etcds:// (TLS)")
    return EtcdLocation(
        endpoints,
        f"{prefix}/",
        tls,
        files["ca"],
        files["cert"],
        files["key"],
        unquote(user),
        unquote(password),
        float(query.get("timeout", 5.0)),
        int(query.get("max_request_bytes", MAX_REQUEST_BYTES)),
        max_txn_ops,
    )


def _endpoint(host: str) -> str:
    """``host:port``, the port defaulting to 2379 (IPv6 addresses in brackets)."""
    if host.startswith("["):
        address, _, rest = host.partition("]")
        name, port = f"{address}]", rest.removeprefix(":")
    else:
        name, _, port = host.partition(":")
    port = port or str(DEFAULT_PORT)
    if not port.isdigit() or not name:
        raise ValueError(f"an etcd member is host:port: {host!r}")
    return f"{name}:{port}"


def range_end(prefix: bytes) -> bytes:
    """The end of the key range holding every key that starts with ``prefix``."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


class Keys:
    """The store's keys, as bytes."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.encode()
        self.meta = self.prefix + b"meta"
        self.count = self.prefix + b"count"
        self.sessions = self.prefix + b"s/"
        self.deadlines = self.prefix + b"d/"
        self._marks = self.prefix + b"m/"
        self._children = self.prefix + b"c/"
        self._requests = self.prefix + b"q/"
        self.batch = self.prefix + b"batch"
        self._batch_requests = self.prefix + b"b/"

    def tenant_count(self, tenant: str) -> bytes:
        return self.prefix + b"t/" + tenant.encode()

    def session(self, session_id: str) -> bytes:
        return self.sessions + session_id.encode()

    def session_id(self, key: bytes) -> str:
        """The id of a session, mark or deadline key."""
        return key[len(self.sessions) :].decode()

    def mark(self, session_id: str) -> bytes:
        return self._marks + session_id.encode()

    def deadline(self, session_id: str) -> bytes:
        return self.deadlines + session_id.encode()

    def children(self, parent_id: str) -> bytes:
        """The prefix of ``parent_id``'s parent links."""
        return self._children + parent_id.encode() + b" "

    def child(self, parent_id: str, child_id: str) -> bytes:
        return self.children(parent_id) + child_id.encode()

    def requests(self, session_id: str) -> bytes:
        """The prefix of ``session_id``'s request ids."""
        return self._requests + session_id.encode() + b" "

    def request(self, session_id: str, request_id: str) -> bytes:
        return self.requests(session_id) + request_id.encode()

    def batch_request(self, request_id: str) -> bytes:
        """A BatchWrite's request id (``tenant\nid``)."""
        return self._batch_requests + request_id.encode()

    def kind(self, key: bytes) -> bytes:
        """``s/``, ``m/``, ``d/``… of a key of this store."""
        return key[len(self.prefix) : len(self.prefix) + 2]
