"""The one exception hierarchy Norax raises.

Every rejection of user input is a :class:`NoraxError`; the input subclasses also derive
from :class:`ValueError` so that generic handlers keep working.
"""

from __future__ import annotations


class NoraxError(Exception):
    """Base class of every error Norax raises on purpose."""


class InvalidInputError(NoraxError, ValueError):
    """A text, id, time, ``k``, filter or metadata value that Norax cannot accept.

    Raised before anything is written, so a rejected batch leaves the store unchanged.
    """


class DuplicateIdError(InvalidInputError):
    """An id is repeated within one batch, or ``add`` was given an id that already exists."""


class MemoryNotFoundError(NoraxError, KeyError):
    """An id that the store does not hold."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else "memory not found"


class DimensionMismatchError(NoraxError):
    """The store was built with an embedder of another dimension or model."""


class ModelNotFoundError(NoraxError):
    """A local model (embedding or spaCy) could not be found."""


class StoreLockedError(NoraxError):
    """Another process holds the embedded store open for writing."""


class WeightsError(NoraxError, ValueError):
    """Fusion weights or a weights file are invalid."""


class IndexInconsistentError(NoraxError):
    """A derived index disagrees with Chroma and could not be repaired."""
