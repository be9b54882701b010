"""Hostile models: every mutation of tests/hostile_models.py (a TinySeg operator of a real optimized
model with one option, body entry or input changed: sizes of 2^31-1 and 2^32, enums out of range,
non-finite or tiny scales, rings too short, too tall or naming no tensor, strides and dilations of 0
or past 2^15, stages out of order, ...) is refused

- by the Python side: `tinyseg analyze` exits 2 with one line and no traceback, and
- by the C++ kernels: the real-kernel runner (tflm_ops/tools/tinyseg_run.cc, built from TFLM_DIR with
  ASan and UBSan, real_kernels.prepare(sanitize=True)) exits non-zero with the kernel's reason, and no
  sanitizer reports anything.

The two unmutated bases run in the same runner (exit 0, no report), so a refusal is the mutation's.
Hostile row sources and sinks (the runner's --hostile-source short|fail|long, --hostile-sink fail)
on the --stream-io Tiny U-Net end with the kernel's status in the same runner, never a report.
Needs TFLM_DIR (make test sets it); the sanitizer build is made once and cached."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import hostile_models
import pytest

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.checks.verify import random_inputs
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, read_model_bytes, save_model
from tinyseg_plugin.transforms.optimizer import Options, search_plans

ROOT = Path(__file__).resolve().parents[1]
SANITIZER_MARKS = (
    "ERROR: AddressSanitizer",
    "runtime error:",
    "ERROR: LeakSanitizer",
    "UndefinedBehaviorSanitizer",
    "SUMMARY: AddressSanitizer",
)
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:halt_on_error=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return hostile_models.generate(tmp_path_factory.mktemp("hostile"))


def _analyze(path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", "analyze", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def _python_refuses(path: Path) -> tuple[bool, str]:
    p = _analyze(path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    ok = (
        p.returncode == 2
        and len(lines) == 1
        and "Traceback" not in p.stderr
        and not p.stdout.strip()
    )
    return ok, (lines[0] if lines else f"exit {p.returncode}, no message")


def test_python_side_refuses_every_mutation(models: dict[str, Path], counts) -> None:
    for base in ("base_stream", "base_fetch"):
        assert _analyze(models[base]).returncode == 0, base
    refused = {}
    for mu in hostile_models.MUTATIONS:
        refused[mu.name] = _python_refuses(models[mu.name])
    missed = {n: why for n, (ok, why) in refused.items() if not ok}
    line = (
        f"hostile models: {len(refused)} mutations, refused by Python: {len(refused) - len(missed)}"
    )
    print("\n" + line)
    counts(line)
    assert not missed, missed


def _tflm_dir() -> str:
    d = os.environ.get(real_kernels.ENV_TFLM)
    if not d:
        pytest.skip(
            "set TFLM_DIR to a TFLM 90b983c tree with its third-party downloads (make test sets it) "
            "to run the hostile models in the sanitizer build of the real-kernel runner"
        )
    if not (Path(d) / "tensorflow/lite/micro/tools/make/downloads/flatbuffers").is_dir():
        pytest.skip(f"TFLM_DIR={d} lacks its third-party downloads")
    return d


def _input_bytes(path: Path) -> int:
    graph = (
        build_graph(load_model(path))
        if path.name.startswith("base_") or path == hostile_models.TINY_UNET
        else None
    )
    if graph is None:  # a mutated model keeps its base's inputs; its graph may not even build
        base = "base_stream" if (path.parent / "base_stream.tflite").exists() else "base_fetch"
        graph = build_graph(load_model(path.parent / f"{base}.tflite"))
    return sum(graph.tensors[t].nbytes for t in graph.inputs)


def _run(
    exe: Path, path: Path, tmp: Path, options: tuple[str, ...] = (), data: bytes | None = None
) -> subprocess.CompletedProcess:
    """The sanitized runner on ``path``: ``data`` as its input file, else zeros of its inputs'
    size (a mutation: its base's)."""
    inputs = tmp / "in.bin"
    inputs.write_bytes(data if data is not None else bytes(_input_bytes(path)))
    env = dict(os.environ, **SANITIZER_ENV)
    return subprocess.run(
        [
            str(exe),
            str(path),
            str(inputs),
            str(tmp / "out.bin"),
            "--batches",
            "1",
            "--arena",
            str(64 << 20),
            "--storage",
            str(real_kernels.STORAGE_BYTES),
            *options,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def test_cpp_side_refuses_every_mutation_without_sanitizer_reports(
    models: dict[str, Path], tmp_path: Path, counts
) -> None:
    exe = real_kernels.prepare(_tflm_dir(), sanitize=True)
    image = exe.read_bytes()  # instrumented code calls the sanitizers' runtime: it is linked in
    assert b"__asan_report_" in image and b"__ubsan_handle_" in image
    reports = 0
    assert _run(exe, hostile_models.TINY_UNET, tmp_path).returncode == 0
    want = (tmp_path / "out.bin").read_bytes()
    for base in (
        "base_stream",
        "base_fetch",
    ):  # the bases run clean and compute the original's outputs
        p = _run(exe, models[base], tmp_path)
        assert p.returncode == 0 and not any(m in p.stderr for m in SANITIZER_MARKS), (
            base,
            p.stderr[-2000:],
        )
        assert (tmp_path / "out.bin").read_bytes() == want, base
    refused, missed, reasons = 0, {}, {}
    for mu in hostile_models.MUTATIONS:
        p = _run(exe, models[mu.name], tmp_path)
        sanitizer = any(m in p.stderr for m in SANITIZER_MARKS)
        reports += sanitizer
        reason = real_kernels.failure_reason(p.stderr)
        reasons[mu.name] = reason
        if p.returncode > 0 and not sanitizer:
            refused += 1
        else:
            missed[mu.name] = f"exit {p.returncode}: {p.stderr[-1500:]}"
    line = (
        f"hostile models: {len(hostile_models.MUTATIONS)} mutations, refused by C++ (ASan+UBSan "
        f"runner): {refused}, sanitizer reports: {reports}"
    )
    print("\n" + line)
    counts(line)
    for name, reason in reasons.items():
        print(f"  {name}: {reason}")
    assert not missed, missed
    assert reports == 0
    # The kernel's reason reaches the one line, not only the runner's failing step.
    vague = [n for n, r in reasons.items() if r in ("AllocateTensors failed", "Invoke failed")]
    assert not vague, vague


def test_failure_reason_carries_the_kernels_reason() -> None:
    """The runner prints only its failing step; the kernel's MicroPrintf line before it is the reason."""
    stderr = (
        "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream.cc StreamChain: a ring holds fewer rows "
        "than its readers' windows need\n"
        "Node StreamChain (number 0f) failed to prepare with status 1\n"
        "Failed starting model allocation.\n"
        "tinyseg_run: AllocateTensors failed\n"
    )
    assert real_kernels.failure_reason(stderr) == (
        "AllocateTensors failed: StreamChain: a ring holds fewer rows "
        "than its readers' windows need"
    )
    assert (
        real_kernels.failure_reason("tinyseg_run: cannot read the model\n")
        == "cannot read the model"
    )
    assert real_kernels.failure_reason("") == "no message"


def _hostile_cases(sources: dict, sinks: dict) -> list[tuple[tuple[str, ...], str]]:
    """Each hostile mode and the kernel's sentence for it: the runner misbehaves at row ROWS/2."""
    src, snk = sources[0], sinks[0]
    at = src.rows // 2
    return [
        (
            ("--hostile-source", "short"),
            f"delivered {src.row_bytes - 1} bytes of row {at}, not {src.row_bytes}",
        ),
        (
            ("--hostile-source", "long"),
            f"delivered {src.row_bytes + 1} bytes of row {at}, not {src.row_bytes}",
        ),
        (("--hostile-source", "fail"), f"row source of graph input 0 failed at row {at}: io_error"),
        (
            ("--hostile-sink", "fail"),
            f"row sink of graph output 0 failed at row {snk.rows // 2}: io_error",
        ),
    ]


def _clean_run(
    exe: Path, path: Path, tmp: Path, options: tuple[str, ...], frame: bytes
) -> tuple[subprocess.CompletedProcess, bytes | None]:
    """A sanitized run that no sanitizer reports on, and the output file it left (None: none)."""
    out = tmp / "out.bin"
    out.unlink(missing_ok=True)
    p = _run(exe, path, tmp, options, frame)
    assert not any(m in p.stderr for m in SANITIZER_MARKS), (options, p.stderr[-2000:])
    return p, out.read_bytes() if out.exists() else None


def test_hostile_row_sources_and_sinks_give_a_status(tmp_path: Path) -> None:
    """The --stream-io Tiny U-Net in the ASan/UBSan runner: with honest rows it computes the
    original's outputs; a short row, a row claimed past the buffer, a failing source and a failing
    sink each end Invoke with the kernel's sentence (exit 1, no output), never a sanitizer report."""
    exe = real_kernels.prepare(_tflm_dir(), sanitize=True)
    original = hostile_models.TINY_UNET
    r = search_plans(build_graph(load_model(original)), Options(stream_io=True, smallest=True))
    model = tmp_path / "stream_io.tflite"
    save_model(r.graph.model, model)
    streams = real_kernels.row_streams(r.graph)
    frame = random_inputs(read_model_bytes(original), 0)[0].tobytes()
    rows = tuple(real_kernels.stream_options(*streams))
    want, want_out = _clean_run(exe, original, tmp_path, (), frame)
    got, got_out = _clean_run(exe, model, tmp_path, rows, frame)
    assert want.returncode == got.returncode == 0, got.stderr
    assert got_out == want_out is not None
    for hostile, sentence in _hostile_cases(*streams):
        p, out = _clean_run(exe, model, tmp_path, rows + hostile, frame)
        reason = real_kernels.failure_reason(p.stderr)
        assert p.returncode == 1 and reason.startswith("Invoke failed: StreamChain: "), p.stderr
        assert sentence in reason and out is None, (hostile, reason)
