"""``python -m sessiontodo_acp -- <agent command…>`` runs the proxy, like ``sessiontodo-acp-proxy``."""

from sessiontodo_acp.launch import main

main()
