"""Fuzzing the command line with damaged copies of real models.

Random byte flips (biased towards the flatbuffer's tables, where a flip changes the
graph rather than a weight) and truncations of the Tiny U-Net and the shared models.
Whatever the damage, every command must answer as docs/cli.md says: exit code 0, 2,
3 or 4; one line on stderr when it fails; never a traceback; never a signal (TFLM runs
in a child process, so its crashes become exit 2).

Most cases run ``main()`` in this process (fast; an unexpected exception fails the test
with its traceback); a sample runs the real ``tinyseg`` process to check exit status and
stderr end to end. Seeds are fixed, so a failure reproduces.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, SHARED_MODELS, TINY_UNET

from tinyseg_plugin.cli import main
from tinyseg_plugin.ir.schema import fb

ALLOWED = {0, 2, 3, 4}


def _sources() -> list[Path]:
    paths = [TINY_UNET] + sorted(SHARED_MODELS.glob("*.tflite"))
    return [p for p in paths if p.exists()]


def _table_positions(data: bytes) -> np.ndarray:
    """Byte positions outside every buffer's data: the tables a flip turns into a different graph."""
    mask = np.ones(len(data), bool)
    m = fb.Model.GetRootAs(data, 0)
    for i in range(m.BuffersLength()):
        b = m.Buffers(i)
        n = b.DataLength()
        if n:
            pos = b._tab.Vector(b._tab.Offset(4))
            mask[pos : pos + n] = False
    return np.flatnonzero(mask)


def mutants(data: bytes, n: int, seed: int) -> list[tuple[str, bytes]]:
    """n damaged copies: 1-3 byte flips (3 in 4 in the tables) or a truncation (1 in 5)."""
    rng = np.random.default_rng(seed)
    tables = _table_positions(data)
    out = []
    for k in range(n):
        if rng.random() < 0.2:
            cut = int(rng.integers(0, len(data)))
            out.append((f"truncated to {cut}", data[:cut]))
            continue
        b = bytearray(data)
        where = []
        for _ in range(int(rng.integers(1, 4))):
            pos = (
                int(rng.choice(tables)) if rng.random() < 0.75 else int(rng.integers(0, len(data)))
            )
            b[pos] ^= int(rng.integers(1, 256))
            where.append(pos)
        out.append((f"flipped {where}", bytes(b)))
    return out


def _check(rc: int, err: str, what: str) -> None:
    lines = err.strip().splitlines()
    assert rc in ALLOWED, f"{what}: exit {rc}: {err.strip()[-400:]}"
    assert "Traceback" not in err, f"{what}: {err}"
    if rc not in (0, 3):
        assert len(lines) == 1 and lines[0].startswith("tinyseg: error:"), f"{what}: {lines}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[tuple[str, Path, Path]]:
    """(description, original, damaged file) for every mutant of every source model."""
    d = tmp_path_factory.mktemp("fuzz")
    cases = []
    for s, src in enumerate(_sources()):
        data = src.read_bytes()
        for k, (what, bad) in enumerate(mutants(data, 100, seed=1000 + s)):
            p = d / f"{src.stem}_{k}.tflite"
            p.write_bytes(bad)
            cases.append((f"{src.name} {what}", src, p))
    return cases


def test_analyze_survives_every_mutant(corpus, tmp_path: Path, capfd) -> None:
    for what, _, bad in corpus:
        rc = main(["analyze", str(bad), "--json", str(tmp_path / "a.json")])
        _, err = capfd.readouterr()
        _check(rc, err, f"analyze {what}")
    assert len(corpus) >= 300


def test_analyze_stream_survives_mutants(corpus, capfd) -> None:
    """The streaming estimate runs the chain search on whatever validate lets through."""
    for what, _, bad in corpus[::25]:
        rc = main(["analyze", str(bad), "--stream", "--json"])
        _, err = capfd.readouterr()
        _check(rc, err, f"analyze --stream {what}")


def test_verify_survives_mutants(corpus, capfd) -> None:
    for what, src, bad in corpus[::8]:
        rc = main(["verify", str(src), str(bad), "--runs", "1"])
        _, err = capfd.readouterr()
        _check(rc, err, f"verify {what}")


def test_verify_survives_damaged_optimized_models(tmp_path: Path, capfd) -> None:
    """Damaged TinySeg operators (custom options, slots, markers) in the second argument."""
    opt = tmp_path / "opt.tflite"
    assert main(["optimize", str(TINY_UNET), "-o", str(opt), "-q", "--runs", "1"]) == 0
    capfd.readouterr()
    for k, (what, bad) in enumerate(mutants(opt.read_bytes(), 20, seed=77)):
        p = tmp_path / f"bad{k}.tflite"
        p.write_bytes(bad)
        for args in (["analyze", str(p)], ["verify", str(TINY_UNET), str(p), "--runs", "1"]):
            rc = main(args)
            _, err = capfd.readouterr()
            _check(rc, err, f"{args[0]} optimized model {what}")


def test_optimize_survives_mutants(corpus, tmp_path: Path, capfd) -> None:
    """Only mutants of the small models: a flip that keeps the model valid costs a whole optimization."""
    small = [c for c in corpus if c[1].stat().st_size < 50_000][::5]
    assert small
    for what, _, bad in small:
        out = tmp_path / "o.tflite"
        rc = main(["optimize", str(bad), "-o", str(out), "-q", "--runs", "1"])
        _, err = capfd.readouterr()
        _check(rc, err, f"optimize {what}")
        if rc not in (0, 3):
            assert not out.exists(), what
        out.unlink(missing_ok=True)


def test_real_processes_never_die_of_a_signal(corpus, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for what, src, bad in corpus[3::35]:
        for args in (["analyze", str(bad)], ["verify", str(src), str(bad), "--runs", "1"]):
            r = subprocess.run(
                [sys.executable, "-m", "tinyseg_plugin.cli", *args],
                capture_output=True,
                text=True,
                timeout=300,
                env=env,
                cwd=tmp_path,
            )
            assert r.returncode >= 0, f"{what}: killed by signal {-r.returncode}"
            _check(r.returncode, r.stderr, f"{args[0]} {what} (process)")
