"""The OfflineMemoryAllocation metadata: the one place that reads, checks and writes it.

TFLM's planner honours a table of arena offsets stored as model metadata under this name: a header
of three little-endian uint32 (version, subgraph, count) and then ``count`` int32 offsets, one per
tensor of every subgraph in order; -1 means "planned online"."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ..errors import TinySegError

if TYPE_CHECKING:  # the schema module is large; only its type names are needed here
    from .schema import fb

NAME = "OfflineMemoryAllocation"
ONLINE = -1
HEADER_BYTES = 12
INT_MAX = 2**31 - 1


def _name(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")


def is_offline(metadata: "fb.MetadataT") -> bool:
    return _name(metadata.name) == NAME


def _data(model: "fb.ModelT", metadata: "fb.MetadataT") -> bytes:
    buf = model.buffers[metadata.buffer]
    return bytes(bytearray(buf.data if buf.data is not None else []))


def read(model: "fb.ModelT") -> list[int] | None:
    """The offsets of every tensor of the model (ONLINE: planned online), or None without the metadata."""
    for md in model.metadata or []:
        if not is_offline(md):
            continue
        data = _data(model, md)
        if len(data) < HEADER_BYTES:
            raise TinySegError(f"{NAME} metadata is shorter than its {HEADER_BYTES}-byte header")
        count = struct.unpack_from("<I", data, 8)[0]
        if len(data) < HEADER_BYTES + 4 * count:
            raise TinySegError(f"{NAME} metadata is truncated")
        return list(struct.unpack_from(f"<{count}i", data, HEADER_BYTES))
    return None


def validate(model: "fb.ModelT", name: str) -> None:
    """Refuse a table TFLM would misread: short, of the wrong length, or with impossible offsets."""
    for md in model.metadata or []:
        if not is_offline(md):
            continue
        data = _data(model, md)
        where = f"{name}: {NAME} metadata"
        if len(data) < HEADER_BYTES:
            raise TinySegError(f"{where} is shorter than its {HEADER_BYTES}-byte header")
        count = struct.unpack_from("<I", data, 8)[0]
        tensors = sum(len(sg.tensors or []) for sg in model.subgraphs or [])
        if len(data) != HEADER_BYTES + 4 * count:
            raise TinySegError(
                f"{where} is {len(data)} bytes long; its header announces {count} offsets "
                f"({HEADER_BYTES + 4 * count} bytes)"
            )
        if count != tensors:
            raise TinySegError(f"{where} has {count} offsets but the model has {tensors} tensors")
        offsets = struct.unpack_from(f"<{count}i", data, HEADER_BYTES)
        k = 0
        for sg in model.subgraphs:
            for t, _ in enumerate(sg.tensors or []):
                off = offsets[k]
                k += 1
                if off < ONLINE:
                    raise TinySegError(
                        f"{where}: tensor {t} has offset {off} (offsets are >= 0, or -1 for online)"
                    )
                if off > INT_MAX // 2:
                    raise TinySegError(f"{where}: tensor {t} has offset {off:,}, beyond any arena")


def encode(offsets: list[int]) -> bytes:
    """The metadata's bytes for a table of one offset per tensor of the whole model."""
    return struct.pack("<III", 0, 0, len(offsets)) + struct.pack(f"<{len(offsets)}i", *offsets)


def subgraph_base(model: "fb.ModelT", subgraph: int) -> int:
    """Where subgraph ``subgraph``'s tensors start in the table."""
    return sum(len(sg.tensors or []) for sg in model.subgraphs[:subgraph])


def of_subgraph(model: "fb.ModelT", subgraph: int) -> dict[int, int] | None:
    """The offsets of one subgraph's tensors that are planned offline, by tensor index; None without the metadata."""
    offsets = read(model)
    if offsets is None:
        return None
    base = subgraph_base(model, subgraph)
    count = len(model.subgraphs[subgraph].tensors or [])
    return {i: offsets[base + i] for i in range(count) if offsets[base + i] != ONLINE}
