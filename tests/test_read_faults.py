"""Storage faults under the real kernels: the bundled Tiny U-Net, spilled (`optimize --no-stream`)
and streamed, runs in the real-kernel runner (tflm_ops/tools/tinyseg_run.cc) with its fault sweep:
a bit flipped on a device read (three places per read), once only (transient: a marginal QSPI read,
a noisy link) or in storage (stored: retention, read disturb), and failed reads, programs and
erases, each at CALL_LIMIT calls spread evenly over the inference's calls of that kind (every read
of the spilled model's inference is over 1,200 reads, several minutes of sweeping: docs/runtime.md
has that full sweep's counts and its command). No fault may end in an inference that returns OK with outputs other than the original's:
each is reported as an error or leaves the outputs bit-identical, and the next inference is clean.

Needs TFLM_DIR (make test sets it); the runner is the real-kernel check's cached build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model

ROOT = Path(__file__).resolve().parents[1]
TINY_UNET = ROOT / "examples" / "models" / "tiny_unet.tflite"
FLIPS = ("transient-flip", "stored-flip")
FAILS = ("read-fail", "program-fail", "erase-fail")
# Calls swept per fault kind, spread evenly over the inference (its reads are 128-byte pieces of
# codec blocks, its programs 64-byte units of row streams: thousands of calls, tens of ms each).
CALL_LIMIT = 40
SWEEP_SECONDS = 600  # a hang, not a speed target


def _tflm_dir() -> str:
    d = os.environ.get(real_kernels.ENV_TFLM)
    if not d:
        pytest.skip(
            "set TFLM_DIR to a TFLM 90b983c tree with its third-party downloads (make test sets it) "
            "to run the fault sweeps in the real-kernel runner"
        )
    if not (Path(d) / "tensorflow/lite/micro/tools/make/downloads/flatbuffers").is_dir():
        pytest.skip(f"TFLM_DIR={d} lacks its third-party downloads")
    return d


@pytest.fixture(scope="module")
def runner() -> Path:
    return real_kernels.prepare(_tflm_dir())


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, runner: Path) -> Path:
    """The input, and the original's outputs for it from the same runner."""
    d = tmp_path_factory.mktemp("read-faults")
    shape = (1, 80, 120, 3)
    x = np.random.default_rng(7).integers(-128, 128, size=shape, dtype=np.int8)
    (d / "in.bin").write_bytes(x.tobytes())
    _run([str(runner), str(TINY_UNET), str(d / "in.bin"), str(d / "original.bin")])
    return d


def _run(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=SWEEP_SECONDS, check=False)
    assert p.returncode == 0, (cmd, p.stderr[-2000:])
    return p.stdout


def _optimized(work: Path, name: str, flags: tuple[str, ...]) -> Path:
    out = work / f"{name}.tflite"
    if not out.is_file():
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        cmd = [sys.executable, "-m", "tinyseg_plugin.cli", "optimize", str(TINY_UNET)]
        cmd += ["-o", str(out), *flags, "--unverified", "-q"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
        assert p.returncode == 0, p.stderr
    return out


def _sweep(runner: Path, work: Path, model: Path, kind: str) -> dict[str, int | str]:
    """The runner's sweep line as numbers, after checking its clean outputs are the original's."""
    regions = real_kernels.storage_regions(build_graph(load_model(model)))
    out = work / f"{model.stem}-{kind}.bin"
    cmd = [str(runner), str(model), str(work / "in.bin"), str(out), "--fault-sweep", kind]
    cmd += ["--ram-region", str(1 << 20)] * (regions - 1)
    cmd += ["--fault-limit", str(CALL_LIMIT)]
    stdout = _run(cmd)
    assert out.read_bytes() == (work / "original.bin").read_bytes(), f"{model.name}: clean run"
    line = next(ln for ln in stdout.splitlines() if ln.startswith("sweep "))
    words = line.split()
    result: dict[str, int | str] = dict(zip(words[2::2], words[3::2]))
    for k in ("calls", "faults", "wrong", "reported", "harmless"):
        result[k] = int(result[k])
    result["wrong_lines"] = "; ".join(ln for ln in stdout.splitlines() if ln.startswith("wrong "))
    return result


@pytest.mark.parametrize(
    "name,flags",
    [("spilled", ("--no-stream", "--target", "min")), ("streamed", ("--target", "min"))],
    ids=["spilled", "streamed"],
)
def test_no_storage_fault_gives_a_wrong_segmentation(
    runner: Path, work: Path, name: str, flags: tuple[str, ...], counts
) -> None:
    model = _optimized(work, name, flags)
    bad = []
    for kind in FLIPS + FAILS:
        r = _sweep(runner, work, model, kind)
        line = (
            f"storage faults, {name} Tiny U-Net: {r['faults']} {kind}s over {r['calls']} calls: "
            f"{r['wrong']} wrong, {r['reported']} reported, {r['harmless']} harmless"
        )
        print(line)
        counts(line)
        if r["wrong"] or r["after"] != "same":
            bad.append(f"{line} (after the sweep: {r['after']}; {r['wrong_lines']})")
        assert r["reported"] + r["harmless"] + r["wrong"] == r["faults"]
        # Every swept read gets its three flips; the other kinds one fault per swept call.
        expected = (3 if kind in FLIPS else 1) * min(r["calls"], CALL_LIMIT)
        assert r["faults"] == expected > 0, line
        if kind in ("transient-flip", "read-fail"):
            assert r["reported"] > 0, line  # the sweep reaches data the kernels decode
    assert not bad, bad
