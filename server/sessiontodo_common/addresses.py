"""Addresses: whether one is this machine (the test behind every "refusing to listen on a public
address" check), and a URL fit for logs."""

from __future__ import annotations

import ipaddress
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def is_loopback_host(host: str) -> bool:
    """Whether a host (``localhost``, an IP address, ``[v6]``) is this machine, never resolving a name."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to anything


def redact_url(url: str) -> str:
    """A store URL fit for logs: the password in the authority and every ``*password*`` query value masked."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        credentials, _, host = netloc.rpartition("@")
        user, colon, _ = credentials.partition(":")
        netloc = f"{user}{colon and ':***'}@{host}"
    query = [(key, "***" if "password" in key.lower() else value) for key, value in parse_qsl(parts.query)]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, safe="*")))
