"""LangGraph adapter for Norax: a long-term memory store (``BaseStore``) for agents."""

from norax_langgraph.store import NoraxSearchItem, NoraxStore

__all__ = ["NoraxSearchItem", "NoraxStore"]
