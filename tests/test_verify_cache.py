"""The cache of the original's outputs (checks/output_cache.py): keyed by the model's bytes, the
input and the interpreter; a damaged file is ignored and rewritten; a wrong optimized model is still
caught when the original's outputs come from the cache; entries nobody but this user's tool could
have sealed, hostile files and a secret others may know never change a verdict."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import resource
import secrets
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, TINY_UNET
from test_verify import _respilled

from tinyseg_plugin.checks import interpreter, output_cache
from tinyseg_plugin.checks.verify import EDGE_NAMES, _batch, _details, _what, arena_for, verify
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes
from tinyseg_plugin.ir.schema import opcode_name


def _counting(monkeypatch) -> list[int]:
    """Number of models in each wheel child that runs inputs."""
    calls: list[int] = []
    real = interpreter.run_models

    def counting(models, batches, *a, **kw):
        calls.append(len(models))
        return real(models, batches, *a, **kw)

    monkeypatch.setattr(interpreter, "run_models", counting)
    return calls


def _one_weight_byte_changed(graph):
    """The model with one byte of its first constant tensor with a buffer changed."""
    model = copy.deepcopy(graph.model)
    g = build_graph(model)
    t = next(t for t in g.tensors if t.is_constant and t.nbytes > 0 and t.dtype == "INT8")
    raw = model.subgraphs[0].tensors[t.index]
    data = np.asarray(model.buffers[raw.buffer].data, dtype=np.uint8).copy()
    data[0] ^= 0x40
    model.buffers[raw.buffer].data = data
    return build_graph(model)


def test_store_and_load_round_trip_and_keys(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(output_cache.ENV_DIR, str(tmp_path))
    k = output_cache.key("a" * 64, "tflite-micro 1", 1 << 20, "random seed=0")
    assert k != output_cache.key("b" * 64, "tflite-micro 1", 1 << 20, "random seed=0")
    assert k != output_cache.key("a" * 64, "tflite-micro 2", 1 << 20, "random seed=0")
    assert k != output_cache.key("a" * 64, "tflite-micro 1", 1 << 20, "random seed=1")
    assert output_cache.load(k) is None
    ys = [np.arange(12, dtype=np.int8).reshape(3, 4), np.array([1.5], dtype=np.float32)]
    output_cache.store(k, ys)
    got = output_cache.load(k)
    assert got is not None and len(got) == 2
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, ys))
    (path,) = tmp_path.rglob("*.bin")
    other = output_cache.key("c" * 64, "tflite-micro 1", 1 << 20, "random seed=0")
    (tmp_path / other[:2]).mkdir(exist_ok=True)
    # a file moved under another key
    (tmp_path / other[:2] / f"{other}.bin").write_bytes(path.read_bytes())
    assert output_cache.load(other) is None


def test_the_second_check_runs_only_the_optimized_model(monkeypatch) -> None:
    calls = _counting(monkeypatch)
    orig, twice = _respilled()
    assert verify(orig, twice, runs=2).identical
    assert verify(orig, twice, runs=2).identical
    # the original ran once; the second check took its outputs from the cache
    assert calls == [2, 1]


def test_other_model_bytes_or_another_wheel_miss(monkeypatch) -> None:
    calls = _counting(monkeypatch)
    orig, twice = _respilled()
    assert verify(orig, twice, runs=1).identical
    monkeypatch.setattr(output_cache, "wheel_version", lambda: "tflite-micro another")
    assert verify(orig, twice, runs=1).identical
    assert calls == [2, 2]
    other = _one_weight_byte_changed(orig)  # another original: its own outputs, not orig's
    v = verify(other, twice, runs=1)
    assert calls == [2, 2, 2] and not v.identical


def test_a_damaged_cache_file_is_ignored_and_rewritten(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(output_cache.ENV_DIR, str(tmp_path))
    calls = _counting(monkeypatch)
    orig, twice = _respilled()
    assert verify(orig, twice, runs=1).identical
    files = sorted(tmp_path.rglob("*.bin"))
    assert len(files) == 4  # 1 random input + 3 edge cases
    # the original's outputs altered in every file: trusted, they would fail the check
    for f in files:
        data = bytearray(f.read_bytes())
        data[-1] ^= 0xFF
        f.write_bytes(bytes(data))
    v = verify(orig, twice, runs=1)
    assert v.identical, v.detail
    assert calls == [2, 2]  # the original ran again
    # and its files were rewritten
    assert verify(orig, twice, runs=1).identical and calls == [2, 2, 1]


def test_a_wrong_optimized_model_fails_with_a_warm_cache(monkeypatch) -> None:
    calls = _counting(monkeypatch)
    orig, twice = _respilled()
    assert verify(orig, twice, runs=1).identical
    v = verify(orig, _one_weight_byte_changed(twice), runs=1)
    assert calls == [2, 1] and not v.identical and "random input 0" in v.detail


def test_a_swapped_fetch_slot_fails_with_a_warm_cache(monkeypatch) -> None:
    from tinyseg_plugin.contract import customops

    calls = _counting(monkeypatch)
    orig, twice = _respilled()
    assert verify(orig, twice, runs=1).identical
    fetches = [op for op in twice.operators if op.opcode == customops.FETCHING]
    model = copy.deepcopy(twice.model)
    for op, slot in zip(fetches, (1, 0)):  # the two fetches read each other's slot
        o = customops.decode(op)
        swapped = (customops.Fetched(o.fetched[0].position, slot, o.fetched[0].shape),)
        model.subgraphs[0].operators[op.index].customOptions = list(
            customops.encode(
                customops.FetchingOptions(axis=o.axis, operands=o.operands, fetched=swapped)
            )
        )
    try:
        v = verify(orig, build_graph(model), runs=1)
    except TinySegError as exc:  # the static check of the bodies may see it first
        assert "slot" in str(exc)
        return
    assert calls == [2, 1] and not v.identical, v.detail


# ---------------------------------------------------------------- hostile entries, through the CLI
# Model A is the Tiny U-Net, B the same with its first convolution's filter buffer XOR 0x55, so
# `verify A B` must exit 4. Each test crafts a cache state under A's six keys (3 random inputs and
# 3 edge cases) and runs the real command line in a child process, bounded in time and address
# space (reading /dev/zero or a 2 GB file whole would exceed it). Each run must print exactly what
# the same command prints with an empty cache; then, with the state repaired or rewritten by that
# run, the cache must be used, so the state was read and refused, not missed by a wrong key.

RUNS = 3
RUN_TIMEOUT = 120  # s of wall time; an uncached run takes about 2 s (the counts line's "slowest")
ADDRESS_SPACE = 1 << 30  # the CLI takes under 500 MB (`ulimit -v 500000` passes)
NO_TREE = "(no TFLM tree)"
_TALLY = {"states": 0, "runs": 0, "slowest": 0.0}


@pytest.fixture(scope="module", autouse=True)
def _tally_line(counts):
    """One line of figures for the run's summary (tests/conftest.py `counts`)."""
    yield
    if _TALLY["states"]:
        counts(
            f"hostile output cache: {_TALLY['states']} crafted cache states, {_TALLY['runs']} "
            "`tinyseg verify` runs, each printing the verdict of an empty cache, the repaired "
            f"state then used; slowest run {_TALLY['slowest']:.1f} s"
        )


def _from_cache(line: str) -> str:
    """The line of an uncached check, as it reads when the original's outputs came from the cache."""
    assert NO_TREE in line, line
    return line.replace(NO_TREE, NO_TREE + "; original's outputs from the cache", 1)


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _cli_verify(a: Path, b: Path, cache: Path) -> tuple[int, str]:
    """`tinyseg verify a b --runs 3` with ``cache`` as the output cache: exit code and its line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env[output_cache.ENV_DIR] = str(cache)
    env.pop("TFLM_DIR", None)  # the fallback check
    start = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "tinyseg_plugin.cli", "verify", str(a), str(b)]
            + ["--runs", str(RUNS)],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            env=env,
            preexec_fn=_limit_address_space,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"tinyseg verify did not finish within {RUN_TIMEOUT} s")
    _TALLY["runs"] += 1
    _TALLY["slowest"] = max(_TALLY["slowest"], time.monotonic() - start)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    return r.returncode, lines[0]


@dataclass(frozen=True)
class Pair:
    a: Path
    b: Path
    keys: list[str]  # A's keys, one per input
    ya: list[list[np.ndarray]]  # A's outputs on each input
    yb: list[list[np.ndarray]]  # B's
    same: tuple[int, str]  # `verify A A` with an empty cache
    differ: tuple[int, str]  # `verify A B` with an empty cache


def _filter_xor_55(m) -> None:
    """The first convolution's filter buffer, every byte XOR 0x55."""
    op = next(
        o
        for o in m.subgraphs[0].operators
        if opcode_name(m.operatorCodes[o.opcodeIndex]) == "CONV_2D"
    )
    buf = m.buffers[m.subgraphs[0].tensors[op.inputs[1]].buffer]
    buf.data = np.asarray(buf.data, dtype=np.uint8) ^ np.uint8(0x55)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Pair:
    d = tmp_path_factory.mktemp("pair")
    a, b = d / "a.tflite", d / "b.tflite"
    a.write_bytes(TINY_UNET.read_bytes())
    mb = load_model(TINY_UNET)
    _filter_xor_55(mb)
    b.write_bytes(model_to_bytes(mb))
    ga, gb = build_graph(load_model(a)), build_graph(load_model(b))
    a_bytes, arena = model_to_bytes(ga.model), arena_for(ga)
    n = RUNS + len(EDGE_NAMES)
    keys = [
        output_cache.key(
            output_cache.model_digest(a_bytes),
            output_cache.wheel_version(),
            arena,
            _what(r, RUNS, 0),
        )
        for r in range(n)
    ]
    batches = [_batch(a_bytes, _details(ga), r, RUNS, 0) for r in range(n)]
    ya, yb = interpreter.run_models([a_bytes, model_to_bytes(gb.model)], batches, arena_size=arena)
    same = _cli_verify(a, a, d / "empty-1")
    differ = _cli_verify(a, b, d / "empty-2")
    assert same[0] == 0 and differ[0] == 4 and "outputs differ" in differ[1], (same, differ)
    return Pair(a, b, keys, ya, yb, same, differ)


def _cache() -> Path:
    """This test's output cache folder (tests/conftest.py), private as the tool makes it."""
    c = output_cache.cache_dir()
    c.mkdir(mode=0o700, parents=True, exist_ok=True)
    return c


def _own_secret(cache: Path) -> bytes:
    """The user's secret, as the tool creates it on first use."""
    path = cache / output_cache.KEY_FILE
    path.write_bytes(secrets.token_bytes(output_cache.SECRET_BYTES))
    path.chmod(0o600)
    return path.read_bytes()


def _entry(cache: Path, k: str) -> Path:
    path = cache / k[:2] / f"{k}.bin"
    path.parent.mkdir(exist_ok=True)
    return path


def _body(header: bytes, arrays: list[np.ndarray]) -> bytes:
    """An entry's body as the cache lays it out: header length, header, raw arrays."""
    return len(header).to_bytes(8, "little") + header + b"".join(a.tobytes() for a in arrays)


def _header(k: str, arrays: list[np.ndarray]) -> bytes:
    return json.dumps(
        {"key": k, "outputs": [[a.dtype.str, list(a.shape)] for a in arrays]}
    ).encode()


def _plain_sha(body: bytes) -> bytes:
    """The format a SHA-256 of the content protects, which any writer can recompute."""
    return b"TSOUT1\n" + hashlib.sha256(body).digest() + body


def _sealed(secret: bytes, body: bytes) -> bytes:
    """A body sealed with ``secret`` as the cache seals its entries (whatever the body holds)."""
    magic = output_cache.MAGIC
    return magic + hmac.new(secret, magic + body, hashlib.sha256).digest() + body


def _forged(pair: Pair, make) -> None:
    """B's outputs written under each of A's keys by ``make(k, outputs) -> bytes``."""
    cache = _cache()
    for k, yb in zip(pair.keys, pair.yb):
        _entry(cache, k).write_bytes(make(k, yb))


def _differ_from_the_cache(pair: Pair) -> None:
    """`verify A B` fails as with an empty cache, the original's outputs from the cache."""
    rc, line = _cli_verify(pair.a, pair.b, _cache())
    assert rc == 4 and line == _from_cache(pair.differ[1]), line


@pytest.mark.parametrize("how", ["plain SHA-256", "sealed with another secret"])
def test_forged_outputs_under_the_originals_keys_fail_the_check(pair: Pair, how: str) -> None:
    """Another model's outputs stored under the original's keys: `verify A B` still exits 4."""
    _own_secret(_cache())
    other = secrets.token_bytes(output_cache.SECRET_BYTES)
    if how == "plain SHA-256":
        _forged(pair, lambda k, ys: _plain_sha(_body(_header(k, ys), ys)))
    else:
        _forged(pair, lambda k, ys: output_cache.encode(other, k, ys))
    _TALLY["states"] += 1
    assert _cli_verify(pair.a, pair.b, _cache()) == pair.differ
    _differ_from_the_cache(pair)  # the forged entries were rewritten with A's own outputs


def test_only_the_secret_stands_between_a_forgery_and_a_pass(pair: Pair) -> None:
    """The same forgery sealed with the user's own secret is trusted: so the forgeries above were
    refused by their seal, not missed by a wrong key or path (and the secret must stay private)."""
    secret = _own_secret(_cache())
    _forged(pair, lambda k, ys: output_cache.encode(secret, k, ys))
    rc, line = _cli_verify(pair.a, pair.b, _cache())
    assert rc == 0 and line == _from_cache(pair.same[1]), line


def _deep(k: str, ys: list[np.ndarray]) -> bytes:
    depth = 100_000
    return (f'{{"key": "{k}", "outputs": ' + "[" * depth + "]" * depth + "}").encode()


def _with(specs) -> callable:
    """A header naming ``specs(ys)`` as the outputs' [dtype, shape] pairs."""
    return lambda k, ys: json.dumps({"key": k, "outputs": specs(ys)}).encode()


HEADERS = {
    "a list header": lambda k, ys: b"[]",
    "a 100,000-deep header": _deep,
    "an object dtype": _with(lambda ys: [["|O", list(y.shape)] for y in ys]),
    "a void dtype": _with(lambda ys: [["|V1", [y.nbytes]] for y in ys]),
    "a bool dimension": _with(lambda ys: [[y.dtype.str, [True] + list(y.shape[1:])] for y in ys]),
    "a negative dimension": _with(lambda ys: [[y.dtype.str, [-1, y.size]] for y in ys]),
    "sizes that overflow int64": _with(
        lambda ys: [[y.dtype.str, [2**62, 2**62, 0, 2**62]] for y in ys]
    ),
    "a huge dimension beside a zero one": _with(
        lambda ys: [[y.dtype.str, [0, 10**30]] for y in ys]
    ),
}


def _files(state: str, secret: bytes, pair: Pair, outside: Path):
    """Write ``state`` at each of A's keys (``outside``: a folder beside the cache)."""
    cache = _cache()
    for k, ya, yb in zip(pair.keys, pair.ya, pair.yb):
        path = _entry(cache, k)
        if state == "a FIFO":
            os.mkfifo(path)
        elif state == "a link to /dev/zero":
            path.symlink_to("/dev/zero")
        elif state == "a link out of the folder":  # to B's outputs, sealed with the user's secret
            (outside / k).write_bytes(output_cache.encode(secret, k, yb))
            path.symlink_to(outside / k)
        elif state == "a truncated file":
            data = output_cache.encode(secret, k, ya)
            path.write_bytes(data[: len(data) - 1])
        elif state == "a 2 GB sparse file":
            with open(path, "wb") as f:
                f.truncate(2 << 30)
        elif state.endswith(", plain SHA-256"):
            header = HEADERS[state.removesuffix(", plain SHA-256")](k, ya)
            path.write_bytes(_plain_sha(_body(header, ya)))
        else:  # a malformed header, sealed with the user's own secret: only the parser refuses it
            path.write_bytes(_sealed(secret, _body(HEADERS[state](k, ya), ya)))


STATES = [
    "a FIFO",
    "a link to /dev/zero",
    "a link out of the folder",
    "a truncated file",
    "a 2 GB sparse file",
    "a list header, plain SHA-256",
    "a 100,000-deep header, plain SHA-256",
    *HEADERS,
]


@pytest.mark.parametrize("state", STATES)
def test_a_hostile_entry_is_a_miss(pair: Pair, state: str, tmp_path: Path) -> None:
    """Each run behaves as with an empty cache (no hang, no error, no memory blow-up), and rewrites
    the entry, which the next run uses; nothing is written through a link."""
    secret = _own_secret(_cache())
    outside = tmp_path / "outside"
    outside.mkdir()
    _files(state, secret, pair, outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    _TALLY["states"] += 1
    assert _cli_verify(pair.a, pair.a, _cache()) == pair.same
    for k in pair.keys:
        assert stat.S_ISREG(_entry(_cache(), k).lstat().st_mode)
    rc, line = _cli_verify(pair.a, pair.a, _cache())
    assert rc == 0 and line == _from_cache(pair.same[1]), line
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before


def _key_state(state: str, cache: Path, tmp_path: Path) -> tuple[bytes, callable]:
    """Put the secret file or its folder in ``state``; the secret it holds and the repair."""
    path = cache / output_cache.KEY_FILE
    secret = _own_secret(cache)
    if state == "a link":
        elsewhere = tmp_path / "elsewhere-key"
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
        return secret, lambda: (path.unlink(), elsewhere.rename(path))
    if state == "owned by another user":
        os.chown(path, 65534, -1)
        return secret, lambda: os.chown(path, os.geteuid(), -1)
    if state.startswith("mode "):
        path.chmod(int(state.split()[1], 8))
        return secret, lambda: path.chmod(0o600)
    cache.chmod(int(state.split()[-1], 8))  # "its folder mode ..."
    return secret, lambda: cache.chmod(0o700)


KEY_STATES = [
    "mode 644",
    "mode 640",
    "mode 604",
    "a link",
    "owned by another user",
    "its folder mode 777",
    "its folder mode 770",
    "its folder mode 1777",
]


@pytest.mark.parametrize("state", KEY_STATES)
def test_a_secret_others_may_know_turns_the_cache_off(
    pair: Pair, state: str, tmp_path: Path
) -> None:
    """B's outputs sealed with a secret that is not private to the user: `verify A B` exits 4, the
    cache stays off; once the file or folder is made private, those very entries are trusted."""
    if state == "owned by another user" and os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    cache = _cache()
    secret, repair = _key_state(state, cache, tmp_path)
    _forged(pair, lambda k, ys: output_cache.encode(secret, k, ys))
    _TALLY["states"] += 1
    assert _cli_verify(pair.a, pair.b, cache) == pair.differ
    assert _cli_verify(pair.a, pair.b, cache) == pair.differ  # nothing stored meanwhile
    repair()
    rc, line = _cli_verify(pair.a, pair.b, cache)
    assert rc == 0 and line == _from_cache(pair.same[1]), line


@pytest.mark.parametrize("name", list(HEADERS))
def test_decode_treats_a_malformed_sealed_body_as_absent(pair: Pair, name: str) -> None:
    secret, k, ys = secrets.token_bytes(32), pair.keys[0], pair.ya[0]
    assert output_cache.decode(secret, k, _sealed(secret, _body(HEADERS[name](k, ys), ys))) is None
    good = output_cache.decode(secret, k, _sealed(secret, _body(_header(k, ys), ys)))
    assert good is not None and all(np.array_equal(p, q) for p, q in zip(good, ys))
    assert (
        output_cache.decode(secrets.token_bytes(32), k, output_cache.encode(secret, k, ys)) is None
    )
