"""``python -m sessiontodo_acp -- <agent command…>`` runs the proxy, like ``sessiontodo-acp-proxy``."""

from sessiontodo_acp.proxy import main

main()
