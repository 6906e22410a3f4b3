"""A namespace's stored rows kept as columns, a row built when it is read.

A published payload's rows (:func:`norax_core.published_payload.unpack`) travel column by
column; a client's sidecar keeps a restored namespace's rows in memory until SQL needs them
(:meth:`~norax_core.sidecar.Sidecar.cache`), and its searches read only their results'
records there. :class:`Rows` keeps the columns: the restore's checks and sums read whole
columns, a search reads one row's record by position (:meth:`Rows.record`), and the rows'
tuples are made only when something reads them all (SQL's insert, a snapshot's capture).
Its text columns of one item per row, joined by NUL (tokens, entities, document, metadata),
stay that UTF-8 until read (checked when unpacked, a chunk at a time, their characters
counted for the budget): a record is decoded from its slice. Measured cold on the four
1k-memory namespaces of the 10k scale store (fresh process, each read once, load 2-4): the
payload's rows read in 0.55-0.77 ms with 30-45 minor page faults instead of 1.5-2.6 ms with
235-470 (1,000 tuples of 11 items and 4,000 strings of 0.5 MB no longer made); a search's
first records then cost ~0.1 ms for the id positions and 0.06-0.16 ms per record column
for where its texts start; a client's first query 0.5-1 ms less CPU in all.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any, overload

import numpy as np

_CHUNK = 16_384
"""Bytes of a text column checked a time (:func:`_utf8_chars`): strings small enough to be
served from the heap's free memory, not from fresh pages as a column's whole text is."""

COLUMNS = 11
"""Columns of a stored row (:data:`norax_core.sidecar._FULL`), the last two its record."""
DOCUMENT = 9
"""The column of a row's document; its metadata JSON is the next."""


class _Joined:
    """One column's texts joined by NUL, UTF-8 (checked to be ``n`` valid texts)."""

    __slots__ = ("at", "chars", "n", "raw", "size", "starts")

    def __init__(self, raw: bytes, at: int, size: int, n: int) -> None:
        if n == 0 and size or n and raw.count(b"\0", at, at + size) != n - 1:
            raise ValueError("rows of another shape")
        self.raw, self.at, self.size, self.n = raw, at, size, n
        ascii_ = not size or int(np.frombuffer(raw, np.uint8, size, at).max()) < 0x80
        texts = size if ascii_ else _utf8_chars(raw, at, size)  # invalid UTF-8 raises here
        self.chars = texts - max(n - 1, 0)  # the sum of the texts' lengths (characters)
        self.starts: Any = None

    def items(self) -> list[str]:
        """Every text, in order."""
        if not self.n:
            return []
        return str(memoryview(self.raw)[self.at : self.at + self.size], "utf-8").split("\0")

    def item(self, i: int) -> str:
        """Text ``i`` (``0 <= i < n``), decoded from its slice."""
        starts = self.starts
        if starts is None:  # where each text starts, and past the last's end
            codes = np.frombuffer(self.raw, np.uint8, self.size, self.at)
            starts = np.empty(self.n + 1, np.int64)
            starts[0], starts[self.n] = 0, self.size + 1
            starts[1 : self.n] = np.flatnonzero(codes == 0)
            starts[1 : self.n] += 1
            self.starts = starts
        a, b = self.at + int(starts[i]), self.at + int(starts[i + 1]) - 1
        return str(memoryview(self.raw)[a:b], "utf-8")


def _utf8_chars(raw: bytes, at: int, size: int) -> int:
    """The characters of ``raw[at : at + size]``, decoded :data:`_CHUNK` bytes at a time.

    Raises:
        ValueError: Not UTF-8 (``UnicodeDecodeError`` is one).
    """
    decoder, view, chars = codecs.getincrementaldecoder("utf-8")(), memoryview(raw), 0
    for s in range(at, at + size, _CHUNK):
        chars += len(decoder.decode(view[s : min(s + _CHUNK, at + size)]))
    return chars + len(decoder.decode(b"", final=True))


class Rows(Sequence[tuple[object, ...]]):
    """Stored rows of :data:`COLUMNS` columns: from their columns, or from row tuples.

    :meth:`from_columns`: each column a list (one item per row) or NUL-joined text
    (:class:`_Joined`, decoded when read); :meth:`from_rows`: a list of row tuples
    (a snapshot's), kept as it is. Either reads the same rows whichever way: by position,
    in order, a column, a record. Not changed once made (a caller may keep it).
    """

    def __init__(self, n: int) -> None:
        self._n = n
        self._columns: list[list[Any] | None] = [None] * COLUMNS
        self._joined: list[_Joined | None] = [None] * COLUMNS
        self._rows: list[tuple[object, ...]] | None = None
        self._at: dict[object, int] | None = None

    @classmethod
    def from_columns(cls, n: int, columns: Sequence[list[Any] | _Joined]) -> Rows:
        """Rows of ``columns`` (each of ``n`` items; the caller checked them)."""
        rows = cls(n)
        for i, c in enumerate(columns):
            if isinstance(c, _Joined):
                rows._joined[i] = c
            else:
                rows._columns[i] = c
        return rows

    @classmethod
    def from_rows(cls, rows: list[tuple[object, ...]]) -> Rows:
        """Rows of a list of row tuples (kept, not copied: the caller leaves it unchanged)."""
        made = cls(len(rows))
        made._rows = rows
        return made

    def __len__(self) -> int:
        return self._n

    def column(self, i: int) -> list[Any]:
        """Item ``i`` of every row (kept: the caller leaves it unchanged)."""
        got = self._columns[i]
        if got is None:
            joined = self._joined[i]
            if joined is not None:
                got = joined.items()
            else:
                got = list(map(itemgetter(i), self._rows or ()))
            self._columns[i] = got  # before the joined texts go: :meth:`_item` reads either
            self._joined[i] = None
        return got

    def _item(self, c: int, i: int) -> Any:
        if self._rows is not None:
            return self._rows[i][c]
        got = self._columns[c]
        if got is not None:
            return got[i]
        joined = self._joined[c]
        if joined is not None:
            return joined.item(i)
        return self._columns[c][i]  # type: ignore[index]  # made meanwhile (see column)

    @overload
    def __getitem__(self, i: int) -> tuple[object, ...]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[object, ...]]: ...
    def __getitem__(self, i: int | slice) -> tuple[object, ...] | list[tuple[object, ...]]:
        if isinstance(i, slice):
            return list(self)[i]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("row index out of range")
        if self._rows is not None:
            return self._rows[i]
        return tuple(self._item(c, i) for c in range(COLUMNS))

    def __iter__(self) -> Iterator[tuple[object, ...]]:
        if self._rows is not None:
            return iter(self._rows)
        return zip(*(self.column(c) for c in range(COLUMNS)), strict=True)

    def __eq__(self, other: object) -> bool:
        """Equal to the same rows, as :class:`Rows` or a list of tuples."""
        if isinstance(other, Rows):
            other = list(other)
        return isinstance(other, list) and list(self) == other

    __hash__ = None  # type: ignore[assignment]  # as a list's

    def position(self, mid: object) -> int | None:
        """The position of the row of id ``mid``, if one (the last of that id)."""
        at = self._at
        if at is None:
            at = self._at = dict(zip(self.column(0), range(self._n), strict=True))
        return at.get(mid)

    def record(self, i: int) -> tuple[object, object]:
        """Row ``i``'s document and metadata JSON (``None`` where it holds none)."""
        return self._item(DOCUMENT, i), self._item(DOCUMENT + 1, i)

    def lacking(self) -> list[str]:
        """The ids of the rows that hold no document."""
        if self._joined[DOCUMENT] is not None:
            return []  # texts, every one
        docs = self.column(DOCUMENT)
        return list(map(str, compress(self.column(0), (d is None for d in docs))))

    def text_chars(self, i: int) -> int | None:
        """The sum of column ``i``'s lengths when it holds only texts, else ``None``."""
        joined = self._joined[i]
        if joined is not None:
            return joined.chars
        items = self.column(i)
        if not set(map(type, items)) <= {str}:
            return None
        return sum(map(len, items))
