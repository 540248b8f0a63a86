"""``sessiontodoctl``: an etcdctl-style command line for sessiontodo (the `ctl` extra)."""
