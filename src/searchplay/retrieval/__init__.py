"""searchplay.retrieval: corpus readers, embedder, LanceDB index, search tool and /retrieve server."""

from searchplay.retrieval.search import LanceSearchTool, format_documents, load_search_tool
from searchplay.retrieval.types import Document, SearchTool

__all__ = ["Document", "LanceSearchTool", "SearchTool", "format_documents", "load_search_tool"]
