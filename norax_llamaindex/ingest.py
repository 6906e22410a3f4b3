"""Ingest LlamaIndex documents and nodes into a Norax memory."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import BaseNode

from norax_core.engine import NoraxMemory
from norax_core.ingest import write_records
from norax_llamaindex._convert import _node_to_memory


def add_nodes(
    memory: NoraxMemory,
    nodes: Sequence[BaseNode],
    *,
    namespace: str | None = None,
    kind: str | None = None,
    time_key: str = "created_at",
    upsert: bool = False,
) -> list[str]:
    """Add LlamaIndex ``Document`` or ``TextNode`` objects as memories; returns their ids.

    The node id becomes the memory id, so the same nodes in a ``VectorStoreIndex`` are
    recognised by :class:`~norax_llamaindex.NoraxPostprocessor`. The text is the node's
    content without metadata; ``metadata[time_key]`` (datetime, ISO 8601 string or epoch
    seconds) is the creation time (default now). Metadata values a memory can store are kept
    (str, bool, int, float; dates as ISO strings); others are dropped, as are keys starting
    with ``norax_`` and the keys a search adds (``score``, ``signals``, ...).

    Args:
        memory: The store.
        nodes: Documents or text nodes.
        namespace: Namespace for all of them (default ``"default"``); never read from the
            nodes, since namespaces separate users and the caller chooses.
        kind: Memory kind for all; ``None`` takes each node's ``metadata["kind"]`` when it
            is a string, else ``"episodic"``.
        time_key: Metadata key holding the creation time.
        upsert: Replace memories that already have these ids instead of failing.

    Raises:
        InvalidInputError: Empty text, bad time, bad kind; nothing is written.
        DuplicateIdError: An id repeats, or (without ``upsert``) is already stored.
    """
    rows = [_node_to_memory(node, time_key) for node in nodes]
    return write_records(memory, rows, namespace=namespace, kind=kind, upsert=upsert)
