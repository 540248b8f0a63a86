"""MCP gateway of sessiontodo: ``sessiontodo-mcp`` gives any MCP client (Claude Code, Qwen Code, ...)
todo tools and a subscribable resource backed by one sessiontodo session per MCP session.

``build_server`` is the MCP server (the SDK's low-level ``Server``) for a ``TodoClient``; serve it
over stdio (``mcp.server.stdio.stdio_server``) or streamable HTTP (``http_app``).
"""

from sessiontodo_mcp.http import http_app
from sessiontodo_mcp.server import SESSION_HEADER, build_server
from sessiontodo_mcp.settings import Settings, Transport
from sessiontodo_mcp.tools import ORIGIN, TOOLS, resource_uri

__all__ = ["ORIGIN", "SESSION_HEADER", "TOOLS", "Settings", "Transport", "build_server", "http_app", "resource_uri"]
