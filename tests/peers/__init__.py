"""Peer tier: real external peers, one folder each (``tests/peers/<peer>/``): the Node, OpenCode and ACP
SDKs, the real OpenCode, Redis, grpcurl, HAProxy, Prometheus."""
