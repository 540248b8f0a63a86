"""Whether an address is this machine: the test behind every "refusing to listen on a public address" check."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """Whether a host (``localhost``, an IP address, ``[v6]``) is this machine, never resolving a name."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to anything
