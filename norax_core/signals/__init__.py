"""The four retrieval signals, each behind :class:`~norax_core.signals.base.Signal`."""

from norax_core.signals.base import Query, Signal

__all__ = ["Query", "Signal"]
