"""Contract tier: the store, feed and watch contracts, checked alike on every store (memory, sqlite, Redis, etcd)."""
