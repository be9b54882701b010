"""Reading and writing .tflite files through the schema's object API.

A model read here and written back keeps every table the schema has (buffers,
metadata, signature defs, all subgraphs, quantization). Buffer data is written
16-byte aligned, as TFLite's own writer does, so that kernels may read weights
with wide loads on the target.
"""
from __future__ import annotations

import copy
import os
import stat
import tempfile
from pathlib import Path

import flatbuffers
import numpy as np

from .errors import TinySegError
from .schema import fb

FILE_IDENTIFIER = b"TFL3"
BUFFER_ALIGNMENT = 16


MAX_MODEL_BYTES = 4 << 30  # beyond the 2 GB flatbuffer limit plus external buffers: not a microcontroller model


def read_model_bytes(path: str | os.PathLike[str]) -> bytes:
    """The raw bytes of a model file, with the checks that need no parsing.

    Only regular files are read (a FIFO or /dev/zero would block or never end), and
    only up to MAX_MODEL_BYTES."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise TinySegError(f"{p}: no such file") from None
    except OSError as exc:
        raise TinySegError(f"{p}: cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise TinySegError(f"{p}: is a directory, not a .tflite model")
    if not stat.S_ISREG(st.st_mode):
        raise TinySegError(f"{p}: not a regular file (a device, FIFO or socket), not a .tflite model")
    if st.st_size > MAX_MODEL_BYTES:
        raise TinySegError(f"{p}: {st.st_size:,} bytes, larger than any model this tool handles")
    try:
        with open(p, "rb") as fh:
            # at most what stat saw (and one byte more): read(n) reserves n bytes up front
            data = fh.read(min(st.st_size, MAX_MODEL_BYTES) + 1)
    except OSError as exc:
        raise TinySegError(f"{p}: cannot read: {exc.strerror}") from None
    if not data:
        raise TinySegError(f"{p}: empty file, not a .tflite model")
    if len(data) > MAX_MODEL_BYTES:
        raise TinySegError(f"{p}: larger than any model this tool handles")
    return data


def parse_model(data: bytes, name: str = "model") -> "fb.ModelT":
    """Parse flatbuffer bytes into the object API, rejecting anything that is not a whole TFLite model."""
    if len(data) < 8:
        raise TinySegError(f"{name}: too short to be a flatbuffer ({len(data)} bytes)")
    root = int.from_bytes(data[0:4], "little")
    if root < 8 or root + 4 > len(data):
        raise TinySegError(f"{name}: not a flatbuffer (root offset {root} outside the {len(data)}-byte file)")
    ident = data[4:8]
    if ident != FILE_IDENTIFIER:
        raise TinySegError(
            f"{name}: wrong file identifier {ident!r}, expected {FILE_IDENTIFIER!r} (not a TFLite model)"
        )
    try:
        model = fb.ModelT.InitFromObj(fb.Model.GetRootAs(data, 0))
    except Exception:  # flatbuffers raises assorted errors on corrupt input
        raise TinySegError(f"{name}: corrupt or truncated flatbuffer (a table or vector lies outside the "
                           f"{len(data):,}-byte file)") from None
    _check_structure(model, name, len(data))
    _load_external_buffers(model, data, name)
    from .validate import validate_model

    validate_model(model, name)
    return model


def load_model(path: str | os.PathLike[str]) -> "fb.ModelT":
    """Load a .tflite file into the schema's object API."""
    return parse_model(read_model_bytes(path), str(path))


def _check_structure(model: "fb.ModelT", name: str, size: int) -> None:
    """Index checks the flatbuffer verifier would make and TFLM relies on."""
    if not model.subgraphs:
        raise TinySegError(f"{name}: the model has no subgraphs")
    n_buffers = len(model.buffers or [])
    n_codes = len(model.operatorCodes or [])
    for s, sg in enumerate(model.subgraphs):
        n_tensors = len(sg.tensors or [])
        for t, tensor in enumerate(sg.tensors or []):
            if not 0 <= tensor.buffer < max(n_buffers, 1):
                raise TinySegError(f"{name}: subgraph {s} tensor {t} names buffer {tensor.buffer}, which does not exist")
        for o, op in enumerate(sg.operators or []):
            if not 0 <= op.opcodeIndex < n_codes:
                raise TinySegError(f"{name}: subgraph {s} operator {o} has an invalid opcode index {op.opcodeIndex}")
            for idx in list(op.inputs if op.inputs is not None else []) + list(
                op.outputs if op.outputs is not None else []
            ):
                if idx < -1 or idx >= n_tensors:
                    raise TinySegError(f"{name}: subgraph {s} operator {o} names tensor {idx}, which does not exist")
        for idx in list(sg.inputs if sg.inputs is not None else []) + list(
            sg.outputs if sg.outputs is not None else []
        ):
            if not 0 <= idx < n_tensors:
                raise TinySegError(f"{name}: subgraph {s} input/output names tensor {idx}, which does not exist")


def _load_external_buffers(model: "fb.ModelT", data: bytes, name: str) -> None:
    """Pull buffers stored after the flatbuffer (the >2 GB layout) into the model, so writing is uniform."""
    for i, buf in enumerate(model.buffers or []):
        if buf.offset > 1:
            end = buf.offset + buf.size
            if end > len(data):
                raise TinySegError(f"{name}: buffer {i} lies past the end of the file (truncated?)")
            buf.data = np.frombuffer(data[buf.offset:end], dtype=np.uint8).copy()
            buf.offset = 0
            buf.size = 0


class _AlignedBufferT(fb.BufferT):
    """A BufferT whose data vector starts on a 16-byte boundary."""

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802 (schema naming)
        data_off = None
        if self.data is not None:
            payload = np.asarray(self.data, dtype=np.uint8).tobytes()
            builder.StartVector(1, len(payload), BUFFER_ALIGNMENT)
            builder.head = builder.head - len(payload)
            builder.Bytes[builder.head : builder.head + len(payload)] = payload
            builder.vectorNumElems = len(payload)
            data_off = builder.EndVector()
        fb.BufferStart(builder)
        if data_off is not None:
            fb.BufferAddData(builder, data_off)
        fb.BufferAddOffset(builder, self.offset)
        fb.BufferAddSize(builder, self.size)
        return fb.BufferEnd(builder)


def model_to_bytes(model: "fb.ModelT") -> bytes:
    """Serialise a model; the input object is not changed."""
    m = copy.copy(model)
    bufs = []
    for b in model.buffers or []:
        ab = _AlignedBufferT()
        ab.data, ab.offset, ab.size = b.data, b.offset, b.size
        bufs.append(ab)
    m.buffers = bufs
    builder = flatbuffers.Builder(1024)
    builder.Finish(m.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def _umask() -> int:
    """The process umask (read by setting it, then restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_writable(path: str | os.PathLike[str], *, directory: bool = False) -> None:
    """Refuse now, before any work, an output that could not be written later.

    For a file: its directory must exist and be writable, and the path must not be a directory.
    For a directory output (``directory=True``): it may exist (then writable) or be created
    in an existing, writable parent."""
    p = Path(path)
    if directory:
        if p.exists():
            if not p.is_dir():
                raise TinySegError(f"{p}: exists and is not a directory")
            _probe(p, p)
            return
        parent = p.parent if str(p.parent) else Path(".")
    else:
        if p.is_dir():
            raise TinySegError(f"{p}: is a directory; give a file name")
        parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise TinySegError(f"{p}: directory {parent} does not exist")
    _probe(parent, p)


def _probe(directory: Path, target: Path) -> None:
    """Create and remove a temporary file in ``directory``: the only honest writability test (root ignores modes)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tinyseg-probe.", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise TinySegError(f"{target}: cannot write into {directory}: {exc.strerror}") from None


def write_all(files: list[tuple[str | os.PathLike[str], bytes]], make_dirs: tuple = ()) -> None:
    """Write several files so that either all appear whole or none does.

    Each file goes to a temporary file in its own directory first (created with the
    user's umask); only when every one of them is complete are they renamed into place.
    ``make_dirs`` are created first and removed again if anything fails."""
    created: list[Path] = []
    current: Path | None = None
    temps: list[tuple[str, Path]] = []
    mode = 0o666 & ~_umask()
    try:
        try:
            for d in make_dirs:
                d = Path(d)
                if not d.is_dir():
                    d.mkdir()
                    created.append(d)
            for path, data in files:
                p = current = Path(path)
                parent = p.parent if str(p.parent) else Path(".")
                if not parent.is_dir():
                    raise TinySegError(f"{p}: directory {parent} does not exist")
                fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=parent)
                temps.append((tmp, p))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    os.fchmod(fh.fileno(), mode)
            for tmp, p in temps:
                current = p
                os.replace(tmp, p)
        except OSError as exc:
            where = current if current is not None else (exc.filename or "output")
            raise TinySegError(f"{where}: cannot write: {exc.strerror}") from None
    except TinySegError:
        for tmp, _ in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        for d in reversed(created):
            try:
                for f in d.iterdir():
                    f.unlink()
                d.rmdir()
            except OSError:
                pass
        raise


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a file so that it is either whole or absent: never half-written."""
    write_all([(path, data)])


def save_model(model: "fb.ModelT", path: str | os.PathLike[str]) -> bytes:
    """Serialise and write atomically; returns the bytes written."""
    data = model_to_bytes(model)
    write_atomic(path, data)
    return data

