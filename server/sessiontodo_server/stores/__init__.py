"""Storage engines behind one narrow interface (``domain.store.TodoStore``), chosen by URL
(``by_url.open_store``): memory, sqlite (the memory store plus a journal), Redis and etcd, each
in its own module; what they share lives beside them (``batch_plan``, ``session_record``,
``codec``, ``group_commit``)."""
