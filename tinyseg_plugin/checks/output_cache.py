"""The original model's outputs on the check's inputs, kept on disk so a second check of the same
model runs only the optimized one in TFLM.

Why: on a 640x640 YOLOv8n one inference in the tflite-micro wheel takes about 4 s of CPU, and the
check runs each model on 3 random and 3 edge-case inputs; the original's six are the same every
time the same file is optimized again (another --target, another kernel set), so they are computed
once. The optimized model always runs.

A run is keyed by the SHA-256 of the original model's bytes, the input (random with its seed, or
the edge case's name), the arena size and the interpreter that computed it (the tflite-micro
wheel's version, or the SHA-256 of the real-kernel runner executable): other bytes, another input
or another interpreter is a miss. Files live in $TINYSEG_OUTPUT_CACHE_DIR, else <cache root>/outputs
(real_kernels.cache_root: $TINYSEG_CACHE_DIR, $XDG_CACHE_HOME/tinyseg or ~/.cache/tinyseg);
deleting the folder clears it.

What it trusts: those keys are public facts, so anyone who can write the folder (a shared CI or team
cache) could store another model's outputs under them and turn a failing check into a pass. Each
entry therefore carries an HMAC-SHA256, over its key and its content, made with a secret of this
user: 32 random bytes in the file KEY_FILE of the cache folder, created with mode 0600 on first use.
The secret is used only while that file is a regular file (not a link) owned by the user with no
permission for group or others, in a folder owned by the user that neither group nor others may
write; otherwise the cache is off and every check runs the original again. An HMAC keeps the cache
on by default (a private folder alone would leave it off for every shared setup) while an entry
written by anyone without the secret, or by an older version, is simply a miss. Entries are read
only as regular files inside the folder (no links followed, FIFOs and devices refused, a size bound
checked before reading), and any malformed entry is a miss, rewritten by the next check.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import secrets
import stat
from functools import lru_cache
from pathlib import Path

import numpy as np

ENV_DIR = "TINYSEG_OUTPUT_CACHE_DIR"
MAGIC = b"TSOUT2\n"
KEY_FILE = "hmac-key"  # the user's secret, in the cache folder itself
SECRET_BYTES = 32
MAC_BYTES = 32
MAX_HEADER = 1 << 20  # a header names the key and each output's dtype and shape
DEFAULT_MAX_BYTES = 256 << 20  # outputs of one run, when the caller does not know better
_DTYPES = frozenset(
    np.dtype(n).str
    for n in (
        "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
        "float16", "float32", "float64", "complex64", "complex128",
    )
)  # fmt: skip
_KEY_RE = re.compile(r"[0-9a-f]{64}")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def cache_dir() -> Path:
    """Where the outputs are kept (see the module docstring)."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser()
    from .real_kernels import cache_root

    return cache_root() / "outputs"


@lru_cache(maxsize=None)
def wheel_version() -> str:
    """The tflite-micro wheel's version: another wheel may compute other outputs."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return "tflite-micro " + version("tflite-micro")
    except PackageNotFoundError:
        return "tflite-micro unknown"


def file_digest(path: Path) -> str:
    """SHA-256 of a file (the runner executable: a rebuilt runner is another interpreter)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_digest(model: bytes) -> str:
    return hashlib.sha256(model).hexdigest()


def key(model_sha: str, interpreter: str, arena: int, what: str) -> str:
    """The key of one run: model bytes, interpreter, arena and input (``what``: 'random seed=N' or
    the edge case's name)."""
    text = json.dumps([model_sha, interpreter, int(arena), what])
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- the entry format (one owner)


def _parts(secret: bytes, k: str, outputs: list[np.ndarray]) -> list:
    """MAGIC, the MAC, then the body: header length, header (key, dtypes, shapes), raw arrays."""
    arrays = [np.ascontiguousarray(x) for x in outputs]
    header = json.dumps(
        {"key": k, "outputs": [[a.dtype.str, list(a.shape)] for a in arrays]}
    ).encode()
    body = [len(header).to_bytes(8, "little"), header] + [
        a.reshape(-1).view(np.uint8) for a in arrays
    ]
    mac = hmac.new(secret, MAGIC, hashlib.sha256)
    for p in body:
        mac.update(p)
    return [MAGIC, mac.digest()] + body


def encode(secret: bytes, k: str, outputs: list[np.ndarray]) -> bytes:
    """The bytes of the entry of ``outputs`` under key ``k``, sealed with ``secret``."""
    return b"".join(bytes(p) for p in _parts(secret, k, outputs))


def entry_bytes(max_bytes: int) -> int:
    """The largest entry whose outputs take at most ``max_bytes``."""
    return len(MAGIC) + MAC_BYTES + 8 + MAX_HEADER + max_bytes


def decode(secret: bytes, k: str, data: bytes) -> list[np.ndarray] | None:
    """The outputs of an entry of key ``k`` sealed with ``secret``; None for anything else."""
    start = len(MAGIC) + MAC_BYTES
    if len(data) < start + 8 or data[: len(MAGIC)] != MAGIC:
        return None
    body = memoryview(data)[start:]
    mac = hmac.new(secret, MAGIC, hashlib.sha256)
    mac.update(body)
    if not hmac.compare_digest(mac.digest(), data[len(MAGIC) : start]):
        return None
    return _arrays(k, body)


def _arrays(k: str, body: memoryview) -> list[np.ndarray] | None:
    """The arrays a body describes, or None when its header or sizes do not add up."""
    n = int.from_bytes(body[:8], "little")
    if n > MAX_HEADER or 8 + n > len(body):
        return None
    try:  # bounded above; a deep or odd header is a miss, never an error
        header = json.loads(bytes(body[8 : 8 + n]))
    except (ValueError, RecursionError):
        return None
    if not isinstance(header, dict) or header.get("key") != k:
        return None
    specs = header.get("outputs")
    if not isinstance(specs, list):
        return None
    out, at = [], 8 + n
    for spec in specs:
        a = _array(spec, body, at)
        if a is None:
            return None
        out.append(a)
        at += a.nbytes
    return out if at == len(body) else None


def _array(spec: object, body: memoryview, at: int) -> np.ndarray | None:
    """One output ``[dtype, shape]`` read at ``at``; None for a dtype or shape it cannot be."""
    if not (isinstance(spec, list) and len(spec) == 2):
        return None
    dtype, shape = spec
    if not (isinstance(dtype, str) and dtype in _DTYPES and isinstance(shape, list)):
        return None
    if len(shape) > 32 or not all(type(d) is int and 0 <= d <= len(body) for d in shape):
        return None
    dt, count = np.dtype(dtype), math.prod(shape)
    if at + count * dt.itemsize > len(body):
        return None
    try:
        return np.frombuffer(body, dtype=dt, count=count, offset=at).reshape(shape)
    except (ValueError, TypeError):
        return None


# ---------------------------------------------------------------- the folder, the secret, files


def _folder(create: bool) -> int | None:
    """The cache folder opened, if it may hold the secret (owned by the user, not writable by group
    or others); None otherwise."""
    path = cache_dir()
    try:
        if create:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, _DIR)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        return None
    return fd


def _read_secret(folder: int) -> bytes | None:
    """The secret, if KEY_FILE is a regular file of the user's, private, of the right size."""
    try:
        fd = os.open(KEY_FILE, os.O_RDONLY | _NOFOLLOW, dir_fd=folder)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return None
        data = os.read(fd, SECRET_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == SECRET_BYTES else None


def _new_secret(folder: int) -> bytes | None:
    """Create KEY_FILE (mode 0600) unless it exists; the secret in it either way. Written whole
    under another name and linked into place, so no reader sees a part of it."""
    tmp = f".key-{secrets.token_hex(8)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=folder)
        try:
            os.write(fd, secrets.token_bytes(SECRET_BYTES))
        finally:
            os.close(fd)
        os.link(tmp, KEY_FILE, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
    except FileExistsError:
        pass  # another check created it first: use that one
    except OSError:
        return None
    finally:
        try:
            os.unlink(tmp, dir_fd=folder)
        except OSError:
            pass
    return _read_secret(folder)


def _read_entry(folder: int, k: str, limit: int) -> bytes | None:
    """The bytes of entry ``k`` if it is a regular file of at most ``limit`` bytes inside the folder."""
    try:
        sub = os.open(k[:2], _DIR | os.O_NOFOLLOW, dir_fd=folder)
    except OSError:
        return None
    try:
        fd = os.open(f"{k}.bin", os.O_RDONLY | _NOFOLLOW, dir_fd=sub)
    except OSError:
        return None
    finally:
        os.close(sub)
    with os.fdopen(fd, "rb", buffering=0) as f:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                return None
            buf = bytearray(st.st_size)
            view, got = memoryview(buf), 0
            while got < len(buf):
                n = f.readinto(view[got:])
                if not n:
                    return None  # shorter than it said
                got += n
            return bytes(buf)
        except OSError:
            return None


def load(k: str, max_bytes: int = DEFAULT_MAX_BYTES) -> list[np.ndarray] | None:
    """The outputs stored under key ``k`` (at most ``max_bytes`` of them), or None when absent,
    unreadable, not sealed with this user's secret or malformed."""
    if not _KEY_RE.fullmatch(k):
        return None
    folder = _folder(create=False)
    if folder is None:
        return None
    try:
        secret = _read_secret(folder)
        data = _read_entry(folder, k, entry_bytes(max_bytes)) if secret else None
    finally:
        os.close(folder)
    return None if secret is None or data is None else decode(secret, k, data)


def store(k: str, outputs: list[np.ndarray]) -> None:
    """Keep ``outputs`` under key ``k`` (written whole, then renamed over whatever was there; a
    failure or a refused secret only loses the cache)."""
    if not _KEY_RE.fullmatch(k):
        return
    folder = _folder(create=True)
    if folder is None:
        return
    try:
        secret = _read_secret(folder) or _new_secret(folder)
        if secret is not None:
            _write_entry(folder, k, _parts(secret, k, outputs))
    except OSError:
        pass  # a read-only or full disk: the check still ran, only the cache is lost
    finally:
        os.close(folder)


def _write_entry(folder: int, k: str, parts: list) -> None:
    """Write the entry under a temporary name in its subfolder (never through a link), then rename."""
    try:
        os.mkdir(k[:2], 0o700, dir_fd=folder)
    except FileExistsError:
        pass
    sub = os.open(k[:2], _DIR | os.O_NOFOLLOW, dir_fd=folder)
    tmp = f".tmp-{secrets.token_hex(8)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=sub)
        try:
            with os.fdopen(fd, "wb") as f:
                for p in parts:
                    f.write(p)
            os.replace(tmp, f"{k}.bin", src_dir_fd=sub, dst_dir_fd=sub)
        except BaseException:
            os.unlink(tmp, dir_fd=sub)
            raise
    finally:
        os.close(sub)
