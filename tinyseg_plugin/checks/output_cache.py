"""The original model's outputs on the check's inputs, kept on disk so a second check of the same
model runs only the optimized one in TFLM.

Why: on a 640x640 YOLOv8n one inference in the tflite-micro wheel takes about 4 s of CPU, and the
check runs each model on 3 random and 3 edge-case inputs; the original's six are the same every
time the same file is optimized again (another --target, another kernel set), so they are computed
once. The optimized model always runs.

A run is keyed by the SHA-256 of the original model's bytes, the input (random with its seed, or
the edge case's name), the arena size and the interpreter that computed it (the tflite-micro
wheel's version, or the SHA-256 of the real-kernel runner executable): other bytes, another input
or another interpreter is a miss. Each file stores its key and a SHA-256 of its content; a file
whose key or digest does not match, or that cannot be read, is ignored and rewritten, never
trusted. Files live in $TINYSEG_OUTPUT_CACHE_DIR, else <cache root>/outputs (real_kernels.cache_root:
$TINYSEG_CACHE_DIR, $XDG_CACHE_HOME/tinyseg or ~/.cache/tinyseg); deleting the folder clears it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

ENV_DIR = "TINYSEG_OUTPUT_CACHE_DIR"
MAGIC = b"TSOUT1\n"


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


def _path(k: str) -> Path:
    return cache_dir() / k[:2] / f"{k}.bin"


def load(k: str) -> list[np.ndarray] | None:
    """The outputs stored under key ``k``, or None when absent, unreadable or not intact."""
    try:
        data = _path(k).read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(MAGIC):
            return None
        body = data[len(MAGIC) + 32 :]
        if hashlib.sha256(body).digest() != data[len(MAGIC) : len(MAGIC) + 32]:
            return None
        n = int.from_bytes(body[:8], "little")
        header = json.loads(body[8 : 8 + n])
        if header.get("key") != k:
            return None
        out, at = [], 8 + n
        for dtype, shape in header["outputs"]:
            dt = np.dtype(dtype)
            if dt.hasobject:
                return None
            size = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            if at + size > len(body):
                return None
            count = int(np.prod(shape, dtype=np.int64))
            out.append(np.frombuffer(body, dtype=dt, count=count, offset=at).reshape(shape))
            at += size
        return out if at == len(body) else None
    except (ValueError, TypeError, KeyError, json.JSONDecodeError):
        return None


def store(k: str, outputs: list[np.ndarray]) -> None:
    """Keep ``outputs`` under key ``k`` (written whole, then renamed; a failure only loses the cache)."""
    arrays = [np.ascontiguousarray(x) for x in outputs]
    header = json.dumps(
        {"key": k, "outputs": [[a.dtype.str, list(a.shape)] for a in arrays]}
    ).encode()
    h = hashlib.sha256()
    parts = [len(header).to_bytes(8, "little"), header] + [
        a.reshape(-1).view(np.uint8) for a in arrays
    ]
    for p in parts:
        h.update(p)
    path = _path(k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC)
                f.write(h.digest())
                for p in parts:
                    f.write(p)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # a read-only or full disk: the check still ran, only the cache is lost
