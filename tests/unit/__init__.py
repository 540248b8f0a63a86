"""Unit tier: domain and pure code in one process, with no sockets and no child processes (``make test-fast``)."""
