"""A FlexBuffers reader for custom options: the values ``flatbuffers.flexbuffers.Loads`` gives,
read in one pass over the buffer.

The library's reader copies the rest of the buffer for every key it reads, so a StreamChain with
n body tensors took time quadratic in n (minutes for 20,000). This reader touches each byte a
bounded number of times, checks every offset against the buffer, and refuses (ValueError) a
buffer that points outside itself, nests deeper than MAX_DEPTH or makes it read more values than
the buffer has bytes (shared sub-vectors cannot make it loop or blow up). Writing stays with the
library (customops.encode)."""

from __future__ import annotations

import struct

MAX_DEPTH = 64  # the contract nests 4 deep; a hostile buffer cannot recurse without end

_INT = {1: "<b", 2: "<h", 4: "<i", 8: "<q"}
_UINT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}
_FLOAT = {4: "<f", 8: "<d"}
# Types (the FlexBuffers specification's numbering)
_NULL, _INT_T, _UINT_T, _FLOAT_T, _KEY, _STRING = 0, 1, 2, 3, 4, 5
_IND_INT, _IND_UINT, _IND_FLOAT, _MAP, _VECTOR = 6, 7, 8, 9, 10
_VECTOR_INT, _VECTOR_STRING_DEPRECATED, _VECTOR_INT2, _VECTOR_FLOAT4 = 11, 15, 16, 24
_BLOB, _BOOL, _VECTOR_BOOL = 25, 26, 36


class Int32s(list):
    """A sized typed vector of 4-byte signed integers: a layout a kernel can read in place (the
    StreamChain stage's "quant" table must be one)."""


class _Reader:
    """One buffer being read: bounds-checked scalars and a budget of values."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.budget = 4 * len(data) + 64  # values one buffer may yield (sharing cannot blow up)

    def scalar(self, table: dict[int, str], pos: int, width: int):
        fmt = table.get(width)
        if fmt is None or pos < 0 or pos + width > len(self.data):
            raise ValueError("a scalar lies outside the buffer or has no such width")
        return struct.unpack_from(fmt, self.data, pos)[0]

    def target(self, pos: int, width: int) -> int:
        """Where the offset stored at ``pos`` points (offsets point backwards)."""
        t = pos - self.scalar(_UINT, pos, width)
        if t < 0:
            raise ValueError("an offset points before the buffer")
        return t

    def count(self, n: int, width: int, at: int) -> None:
        """Spend ``n`` values of the budget; the ``n`` slots of ``width`` bytes at ``at`` fit."""
        self.budget -= n
        if self.budget < 0 or n < 0 or at + n * width > len(self.data):
            raise ValueError("a vector lies outside the buffer")

    def key(self, pos: int) -> str:
        end = self.data.find(b"\0", pos)
        if end < 0:
            raise ValueError("a key has no terminating zero")
        return self.data[pos:end].decode("ascii")

    def sized(self, pos: int, width: int) -> bytes:
        n = self.scalar(_UINT, pos - width, width)
        self.count(n, 1, pos)
        return self.data[pos : pos + n]

    def value(self, pos: int, parent_width: int, packed: int, depth: int):
        """The value of the element stored at ``pos`` (``parent_width`` bytes) with type byte ``packed``."""
        if depth > MAX_DEPTH:
            raise ValueError("nested too deep")
        width, typ = 1 << (packed & 3), packed >> 2
        if typ == _NULL:
            return None
        if typ == _BOOL:
            return bool(self.scalar(_UINT, pos, parent_width))
        if typ == _INT_T:
            return self.scalar(_INT, pos, parent_width)
        if typ == _UINT_T:
            return self.scalar(_UINT, pos, parent_width)
        if typ == _FLOAT_T:
            return self.scalar(_FLOAT, pos, parent_width)
        t = self.target(pos, parent_width)
        if typ in (_IND_INT, _IND_UINT, _IND_FLOAT):
            table = {_IND_INT: _INT, _IND_UINT: _UINT, _IND_FLOAT: _FLOAT}[typ]
            return self.scalar(table, t, width)
        if typ == _KEY:
            return self.key(t)
        if typ == _STRING:
            return self.sized(t, width).decode("utf-8")
        if typ == _BLOB:
            return bytearray(self.sized(t, width))  # as the library gives a blob
        if typ in (_MAP, _VECTOR):
            return self.vector(t, width, typ == _MAP, depth)
        return self.typed(t, width, typ)

    def vector(self, t: int, width: int, is_map: bool, depth: int):
        """An untyped vector (a type byte per element after the elements), or a map: its values
        are such a vector, its keys a typed vector of keys found three slots before it."""
        n = self.scalar(_UINT, t - width, width)
        self.count(n, width + 1, t)
        types = self.data[t + n * width : t + n * width + n]
        keys = None
        if is_map:  # as many entries as it has both keys and values
            keys_at = self.target(t - 3 * width, width)
            keys_width = self.scalar(_UINT, t - 2 * width, width)
            keys = self.typed(keys_at, keys_width, _VECTOR_INT + _KEY - _INT_T, limit=n)
            n = len(keys)
        values = [self.value(t + i * width, width, types[i], depth + 1) for i in range(n)]
        return values if keys is None else dict(zip(keys, values))

    def typed(self, t: int, width: int, typ: int, limit: int | None = None) -> list:
        """A typed vector (its size before it) or a fixed-length one (2, 3 or 4 elements, no size)."""
        if _VECTOR_INT2 <= typ <= _VECTOR_FLOAT4:
            element, n = (typ - _VECTOR_INT2) % 3 + _INT_T, (typ - _VECTOR_INT2) // 3 + 2
        elif _VECTOR_INT <= typ <= _VECTOR_STRING_DEPRECATED or typ == _VECTOR_BOOL:
            element = _BOOL if typ == _VECTOR_BOOL else typ - _VECTOR_INT + _INT_T
            n = self.scalar(_UINT, t - width, width)
        else:
            raise ValueError(f"unknown FlexBuffers type {typ}")
        if limit is not None:
            n = min(n, limit)  # a map reads as many keys as it has values
        self.count(n, width, t)
        if n == 0:
            return []
        if element in (_KEY, _STRING):  # strings in a typed vector are read as keys
            return [self.key(self.target(t + i * width, width)) for i in range(n)]
        table = {_INT_T: _INT, _UINT_T: _UINT, _FLOAT_T: _FLOAT, _BOOL: _UINT}[element]
        fmt = table.get(width)
        if fmt is None:
            raise ValueError("a typed vector has no such width")
        out = list(struct.unpack_from(f"<{n}{fmt[1]}", self.data, t))
        if element == _INT_T and width == 4 and typ == _VECTOR_INT:
            return Int32s(out)
        return [bool(v) for v in out] if element == _BOOL else out


def loads(data: bytes):
    """The value a FlexBuffers buffer holds (maps as dicts, vectors as lists); ValueError when the
    buffer is not one."""
    data = bytes(data)
    if len(data) < 3:
        raise ValueError("too short for a FlexBuffers buffer")
    width = data[-1]
    return _Reader(data).value(len(data) - 2 - width, width, data[-2], 0)
