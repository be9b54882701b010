"""Reading and writing .tflite files through the schema's object API.

A model read here and written back keeps every table the schema has (buffers,
metadata, signature defs, all subgraphs, quantization). Buffer data is written
16-byte aligned, as TFLite's own writer does, so that kernels may read weights
with wide loads on the target.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import secrets
import stat
import tempfile
import time
from pathlib import Path

import flatbuffers
import numpy as np

from .. import deadline
from ..errors import TinySegError, shown
from .schema import fb

FILE_IDENTIFIER = b"TFL3"
ENV_CACHE = "TINYSEG_CACHE_DIR"
JOURNAL_FOLDER = "journal"  # under cache_root(): one file per write_all in progress
JOURNAL_SUFFIX = ".journal"
PART_SUFFIX = ".part"  # a journal being written, not yet in place
PART_STALE_S = 3600.0  # a journal still being written after this long was killed
BUFFER_ALIGNMENT = 16


MAX_MODEL_BYTES = (
    4 << 30
)  # beyond the 2 GB flatbuffer limit plus external buffers: not a microcontroller model
FLATBUFFER_LIMIT = (
    1 << 31
) - 1  # what one flatbuffer can hold; TFLM reads weights only from inside it


def read_model_bytes(path: str | os.PathLike[str]) -> bytes:
    """The raw bytes of a model file, with the checks that need no parsing.

    Only regular files are read (a FIFO or /dev/zero would block or never end), and
    only up to MAX_MODEL_BYTES."""
    p = Path(path)
    n = shown(p)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise TinySegError(f"{n}: no such file") from None
    except OSError as exc:
        raise TinySegError(f"{n}: cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise TinySegError(f"{n}: is a directory, not a .tflite model")
    if not stat.S_ISREG(st.st_mode):
        raise TinySegError(
            f"{n}: not a regular file (a device, FIFO or socket), not a .tflite model"
        )
    if st.st_size > MAX_MODEL_BYTES:
        raise TinySegError(f"{n}: {st.st_size:,} bytes, larger than any model this tool handles")
    try:
        with open(p, "rb") as fh:
            # at most what stat saw (and one byte more): read(n) reserves n bytes up front
            data = fh.read(min(st.st_size, MAX_MODEL_BYTES) + 1)
    except OSError as exc:
        raise TinySegError(f"{n}: cannot read: {exc.strerror}") from None
    if not data:
        raise TinySegError(f"{n}: empty file, not a .tflite model")
    if len(data) > MAX_MODEL_BYTES:
        raise TinySegError(f"{n}: larger than any model this tool handles")
    return data


def parse_model(data: bytes, name: str = "model") -> "fb.ModelT":
    """Parse flatbuffer bytes into the object API, rejecting anything that is not a whole TFLite model."""
    deadline.check("reading the model")
    if len(data) < 8:
        raise TinySegError(f"{name}: too short to be a flatbuffer ({len(data)} bytes)")
    root = int.from_bytes(data[0:4], "little")
    if root < 8 or root + 4 > len(data):
        raise TinySegError(
            f"{name}: not a flatbuffer (root offset {root} outside the {len(data)}-byte file)"
        )
    ident = data[4:8]
    if ident != FILE_IDENTIFIER:
        raise TinySegError(
            f"{name}: wrong file identifier {ident!r}, expected {FILE_IDENTIFIER!r} (not a TFLite model)"
        )
    try:
        model = fb.ModelT.InitFromObj(fb.Model.GetRootAs(data, 0))
    except Exception:  # flatbuffers raises assorted errors on corrupt input
        raise TinySegError(
            f"{name}: corrupt or truncated flatbuffer (a table or vector lies outside the "
            f"{len(data):,}-byte file)"
        ) from None
    deadline.check("validating the model")
    _check_structure(model, name, len(data))
    _load_external_buffers(model, data, name)
    from .validate import validate_model

    validate_model(model, name)
    deadline.check("validating the model")
    return model


def load_model(path: str | os.PathLike[str]) -> "fb.ModelT":
    """Load a .tflite file into the schema's object API (messages name it as ``shown`` prints it)."""
    return parse_model(read_model_bytes(path), shown(path))


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
                raise TinySegError(
                    f"{name}: subgraph {s} tensor {t} names buffer {tensor.buffer}, which does not exist"
                )
        for o, op in enumerate(sg.operators or []):
            if not 0 <= op.opcodeIndex < n_codes:
                raise TinySegError(
                    f"{name}: subgraph {s} operator {o} has an invalid opcode index {op.opcodeIndex}"
                )
            for idx in list(op.inputs if op.inputs is not None else []) + list(
                op.outputs if op.outputs is not None else []
            ):
                if idx < -1 or idx >= n_tensors:
                    raise TinySegError(
                        f"{name}: subgraph {s} operator {o} names tensor {idx}, which does not exist"
                    )
        for idx in list(sg.inputs if sg.inputs is not None else []) + list(
            sg.outputs if sg.outputs is not None else []
        ):
            if not 0 <= idx < n_tensors:
                raise TinySegError(
                    f"{name}: subgraph {s} input/output names tensor {idx}, which does not exist"
                )


def check_inline_fits(model: "fb.ModelT", name: str) -> None:
    """Refuse a model whose buffers could not all be written inside one flatbuffer: TFLM ignores
    ``Buffer.offset``, so a written model must carry its weights inside (model_to_bytes does)."""
    weights = sum(len(b.data) for b in model.buffers or [] if b.data is not None)
    if weights > FLATBUFFER_LIMIT - (64 << 20):  # room for the graph tables themselves
        raise TinySegError(
            f"{name}: its buffers hold {weights:,} bytes, more than one flatbuffer can (2 GB); TFLM "
            "reads weights only from inside the flatbuffer, so no model written from it could run"
        )


def _load_external_buffers(model: "fb.ModelT", data: bytes, name: str) -> None:
    """Pull buffers stored after the flatbuffer (the >2 GB layout) into the model: a written model
    carries them inside, where TFLM reads them (it ignores ``Buffer.offset``)."""
    for i, buf in enumerate(model.buffers or []):
        if buf.offset > 1:
            end = buf.offset + buf.size
            if end > len(data):
                raise TinySegError(f"{name}: buffer {i} lies past the end of the file (truncated?)")
            buf.data = np.frombuffer(data[buf.offset : end], dtype=np.uint8).copy()
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


def destination(path: str | os.PathLike[str]) -> Path:
    """Where writing ``path`` really puts the file: a symbolic link is followed to its target (the
    target is replaced, the link stays a link), whatever links its directories are."""
    p = Path(path)
    real = Path(os.path.realpath(p))
    if os.path.islink(real):  # realpath stops at a loop and leaves it unresolved
        raise TinySegError(
            f"{shown(p)}: a symbolic link that never reaches a file (a loop); give a file name"
        )
    return real


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """The same file: the same real path, or, when both exist, the same inode (hard links)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def check_outputs(
    inputs: list[str | os.PathLike[str]],
    outputs: list[tuple[str, str | os.PathLike[str] | None]],
    may_replace_input: frozenset[str] = frozenset(),
) -> None:
    """Refuse, before any work, an output that is one of the inputs or the same file as another output.

    ``outputs`` are (option, path) pairs (``None`` paths are skipped); ``may_replace_input`` names the
    options allowed to be an input (``-o`` under ``--force``). Files are compared by real path (so
    through symbolic links) and by inode (hard links). Every command and every output goes through
    here, so that no report, plot or table is ever written over a model."""
    given = [(opt, path) for opt, path in outputs if path is not None]
    for opt, path in given:
        for inp in inputs:
            if opt not in may_replace_input and _same_file(path, inp):
                hint = " (or --force to replace it)" if opt == "-o" else ""
                raise TinySegError(
                    f"{opt} {shown(path)} is the input model {shown(inp)}; choose another file{hint}"
                )
    for k, (opt, path) in enumerate(given):
        for opt2, path2 in given[:k]:
            if _same_file(path, path2):
                raise TinySegError(
                    f"{opt2} {shown(path2)} and {opt} {shown(path)} are the same file; "
                    "give each output a file of its own"
                )


def check_writable(path: str | os.PathLike[str], *, directory: bool = False) -> None:
    """Refuse now, before any work, an output that could not be written later.

    For a file: its directory must exist and be writable, and the path must not be a directory
    (a symbolic link counts as the file it names). For a directory output (``directory=True``):
    it may exist (then writable) or be created in an existing, writable parent."""
    p = Path(path)
    if directory:
        if p.exists():
            if not p.is_dir():
                raise TinySegError(f"{shown(p)}: exists and is not a directory")
            _probe(p, p)
            return
        parent = p.parent if str(p.parent) else Path(".")
    else:
        real = destination(p)
        if real.is_dir():
            raise TinySegError(f"{shown(p)}: is a directory; give a file name")
        if real.exists() and not real.is_file():
            raise TinySegError(
                f"{shown(p)}: not a regular file (a device, FIFO or socket); give a file name"
            )
        parent = real.parent
    if not parent.is_dir():
        raise TinySegError(f"{shown(p)}: directory {shown(parent)} does not exist")
    _probe(parent, p)


def _probe(directory: Path, target: Path) -> None:
    """Create and remove a temporary file in ``directory``: the only honest writability test (root ignores modes)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tinyseg-probe.", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise TinySegError(
            f"{shown(target)}: cannot write into {shown(directory)}: {exc.strerror}"
        ) from None


def cache_root() -> Path:
    """The user's tinyseg folder: $TINYSEG_CACHE_DIR, else $XDG_CACHE_HOME/tinyseg, else
    ~/.cache/tinyseg (the real-kernel build, the output cache and the write journals live there)."""
    if os.environ.get(ENV_CACHE):
        return Path(os.environ[ENV_CACHE]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "tinyseg"


def _fsync_dir(d: Path) -> None:
    """Make the entries of ``d`` (a rename, a new or removed file) durable."""
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        os.fchmod(fh.fileno(), mode)
        fh.flush()
        os.fsync(fh.fileno())


def _open_journal(renames: list[tuple[Path, Path]], created: list[Path]) -> tuple[Path, int]:
    """Write and fsync the journal of one write_all (its first line: the renames planned and the
    folders made), held locked until it is removed: a later run leaves a live run's journal alone.
    It is written locked under another name and renamed into place, so another run's ``recover``
    never finds it unlocked while it is alive."""
    folder = cache_root() / JOURNAL_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{os.getpid()}-{secrets.token_hex(8)}{JOURNAL_SUFFIX}"
    part = path.with_name(path.name + PART_SUFFIX)
    fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    entry = {"renames": [[str(t), str(r)] for t, r in renames], "made": [str(d) for d in created]}
    os.write(fd, (json.dumps(entry) + "\n").encode())
    os.fsync(fd)
    os.rename(part, path)  # the lock belongs to the open file, so it holds across the rename
    _fsync_dir(folder)
    return path, fd


def _close_journal(path: Path, fd: int) -> None:
    os.unlink(path)
    os.close(fd)


def _abandoned(part: Path) -> bool:
    """A journal being written whose run (the process id its name starts with) is gone, or that
    is older than any run takes to write one."""
    try:
        if time.time() - part.stat().st_mtime > PART_STALE_S:
            return True
        os.kill(int(part.name.split("-", 1)[0]), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _lock_if_dead(path: Path) -> int | None:
    """The journal at ``path`` opened and locked, or None when a live run holds it or it is gone:
    a run that finished between our open and our lock has already removed it (a later file under
    the name would be another's), so the lock is only ours while ``path`` is still this file."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        same = os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:  # a live run's journal, or removed meanwhile
        same = False
    if not same:
        os.close(fd)
        return None
    return fd


def recover() -> list[str]:
    """Finish what an interrupted write_all left (every command calls this first): a journal that
    says ``commit`` is rolled forward (its remaining temporary files renamed into place: the new
    set), any other is undone (its temporary files and the folders it made removed: the previous
    set stays); then the journal is removed. Journals a running tinyseg holds are left alone.
    Returns one warning per output that could not be completed."""
    folder = cache_root() / JOURNAL_FOLDER
    try:
        journals = sorted(folder.glob(f"*{JOURNAL_SUFFIX}"))
    except OSError:
        return []
    for part in folder.glob(f"*{JOURNAL_SUFFIX}{PART_SUFFIX}"):
        # Killed before it was in place (no temporary file made yet: nothing to undo). One whose
        # run is alive may be between its create and its lock: only a dead or stale run's goes.
        fd = _lock_if_dead(part) if _abandoned(part) else None
        if fd is not None:
            _close_journal(part, fd)
    warnings: list[str] = []
    for path in journals:
        fd = _lock_if_dead(path)
        if fd is None:
            continue
        lines = path.read_bytes().decode(errors="replace").split("\n")
        try:
            entry = json.loads(lines[0])
        except ValueError:  # cut while being written: no temporary file existed yet
            entry = {"renames": [], "made": []}
        warnings += _replay(entry, lines[1:2] == ["commit"])
        _close_journal(path, fd)
    return warnings


def _replay(entry: dict, committed: bool) -> list[str]:
    """Roll one journal's renames forward (``committed``) or undo them."""
    warnings = []
    for tmp, real in entry.get("renames", []):
        if not os.path.lexists(tmp):
            continue
        try:
            if committed:
                os.replace(tmp, real)
                _fsync_dir(Path(real).parent)
            else:
                os.unlink(tmp)
        except OSError as exc:
            warnings.append(f"{shown(real)}: the interrupted run's output was lost: {exc.strerror}")
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    if not committed:
        for d in reversed(entry.get("made", [])):
            with contextlib.suppress(OSError):
                os.rmdir(d)  # only if empty: the folder was made for the outputs
    return warnings


def write_all(files: list[tuple[str | os.PathLike[str], bytes]], make_dirs: tuple = ()) -> None:
    """Write several files so that the next run finds all of them new or all of them as they were.

    Each file goes to a temporary file in its own folder (``.NAME.tinyseg-XXXX``, created with
    the user's umask), fsync'ed. A journal in <cache root>/journal lists the renames before the
    first temporary file is made; once every file is complete, ``commit`` is appended to it and
    fsync'ed, the files are renamed into place, their folders fsync'ed, and the journal removed.
    Killed (power loss, SIGKILL) at any point, the next tinyseg command (``recover``, before it
    does anything else) finds the journal: before ``commit``, it removes the temporary files (the
    previous outputs stay, or none); after it, it renames the remaining ones into place (all the
    new outputs). Between the kill and that next command, the outputs may be a mix of the two sets
    and temporary files may remain. A symbolic link is written through: its target is replaced,
    the link stays. ``make_dirs`` are created first and removed again if anything fails."""
    mode = 0o666 & ~_umask()
    deadline.finish()  # the run's last step: never stopped half-way by --time-limit
    created: list[Path] = []
    current: Path | None = None
    renames: list[tuple[Path, Path]] = []
    journal: tuple[Path, int] | None = None
    try:
        try:
            for d in make_dirs:
                d = Path(d)
                if not d.is_dir():
                    d.mkdir()
                    created.append(d)
            reals = [destination(path) for path, _ in files]
            if len(set(reals)) != len(reals):  # check_outputs refuses this earlier
                raise TinySegError(
                    "two outputs name the same file; give each output a file of its own"
                )
            for (path, _), real in zip(files, reals):
                if not real.parent.is_dir():
                    raise TinySegError(
                        f"{shown(path)}: directory {shown(real.parent)} does not exist"
                    )
                tmp = real.parent / f".{real.name[:40]}.tinyseg-{secrets.token_hex(6)}"
                renames.append((tmp, real))
            current = None
            journal = _open_journal(renames, created)
            for (path, data), (tmp, _) in zip(files, renames):
                current = Path(path)
                _write_file(tmp, data, mode)
            current = None
            os.write(journal[1], b"commit\n")
            os.fsync(journal[1])
            for (path, _), (tmp, real) in zip(files, renames):
                current = Path(path)
                os.replace(tmp, real)
            for folder in dict.fromkeys(real.parent for _, real in renames):
                _fsync_dir(folder)
            _close_journal(*journal)
        except OSError as exc:
            where = current if current is not None else (exc.filename or "output")
            raise TinySegError(f"{shown(where)}: cannot write: {exc.strerror}") from None
    except TinySegError:
        _replay({"renames": [[str(t), str(r)] for t, r in renames]}, committed=False)
        for d in reversed(created):
            with contextlib.suppress(OSError):
                for f in d.iterdir():
                    f.unlink()
                d.rmdir()
        if journal is not None:
            with contextlib.suppress(OSError):
                _close_journal(*journal)
        raise


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a file so that it is either whole or absent: never half-written."""
    write_all([(path, data)])


def save_model(model: "fb.ModelT", path: str | os.PathLike[str]) -> bytes:
    """Serialise and write atomically; returns the bytes written."""
    data = model_to_bytes(model)
    write_atomic(path, data)
    return data
