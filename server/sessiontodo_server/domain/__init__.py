"""The domain: sessions, todos, revisions, watches and the store protocol. No gRPC here."""
