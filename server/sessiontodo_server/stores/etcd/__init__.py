"""The etcd store: several replicas on one etcd cluster (``store.py`` says how)."""

from sessiontodo_server.stores.etcd.keys import EtcdLocation, parse_etcd_url
from sessiontodo_server.stores.etcd.store import EtcdStore

__all__ = ["EtcdLocation", "EtcdStore", "parse_etcd_url"]
