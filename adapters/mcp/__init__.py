"""The MCP adapter: Engram's memory tools for one being, over the official `mcp` SDK (stdio)."""

from engram.adapters.mcp.server import EngramSession, build_server, serve_stdio

__all__ = ["EngramSession", "build_server", "serve_stdio"]
