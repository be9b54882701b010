"""TinySeg's TFLM runtime: the installer, the kernels in TFLM's own test harness, and the
optimized Tiny U-Net end to end in a patched TFLM.

Always run: install() on fake trees (error paths, all-or-nothing writes, idempotence).
With TFLM_DIR (a TFLM 90b983c checkout holding its third-party downloads): the checkout is
copied to a temporary directory, installed into, built with TFLM's make, the kernel tests
run as TFLM make test targets (on the host, and for a Cortex-M7 under qemu-arm with the
reference and the CMSIS-NN kernels), and the shipped runner (tflm_ops/tools/tinyseg_run) runs original and
optimized models on the same random inputs -- bit-identical outputs, and the arena head, tail
and persistent buffers the patched TFLM reports equal what `tinyseg analyze` says for that build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import synth
from conftest import built_examples

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.contract import customops
from tinyseg_plugin.deploy.tflm_install import INSTALL_DIR, install
from tinyseg_plugin.ir import modelio
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.memory.analysis import analyze_graph
from tinyseg_plugin.memory.coldrange import cold_ranges
from tinyseg_plugin.memory.kernels import BuildProfile
from tinyseg_plugin.transforms import optimizer, stream, stream_search
from tinyseg_plugin.transforms.passes import graph_or_none
from tinyseg_plugin.transforms.passes.fuse import ConvFusion, fuse_concat, fuse_conv
from tinyseg_plugin.transforms.passes.spill import SpillPlan, apply_spill, partial_plan

ROOT = Path(__file__).resolve().parent.parent
TINY_UNET = ROOT / "examples" / "models" / "tiny_unet.tflite"
sys.path.insert(0, str(ROOT / "tests" / "tflm_e2e"))
import build_e2e  # noqa: E402  (tests/tflm_e2e/build_e2e.py)
import test_band_exact  # noqa: E402  (its geometries, run through the real kernel here)

# The TFLM files the installer changes in an upstream make tree.
CHANGED = [
    "tensorflow/lite/micro/kernels/transpose_conv.cc",
    "tensorflow/lite/micro/kernels/cmsis_nn/transpose_conv.cc",
    "tensorflow/lite/micro/tools/make/Makefile",
    "tensorflow/lite/micro/kernels/Makefile.inc",
    "tensorflow/lite/micro/fake_micro_context.cc",
    "tensorflow/lite/micro/fake_micro_context.h",
]


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root with its bytes and mtime: 'nothing modified' means equal snapshots."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# The installer on fake and real trees of every layout: tests/test_tflm_install.py.


# ---------------------------------------------------------------- a real TFLM checkout


@pytest.fixture(scope="module")
def tflm_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = os.environ.get("TFLM_DIR")
    if not src:
        pytest.skip("set TFLM_DIR to a TFLM 90b983c checkout with its third-party downloads")
    src_path = Path(src)
    if not (src_path / "tensorflow/lite/micro/tools/make/Makefile").is_file():
        pytest.skip(f"TFLM_DIR={src} is not a TFLM checkout")
    missing = [
        d
        for d in ("flatbuffers", "gemmlowp", "ruy", "kissfft", "pigweed")
        if not (src_path / "tensorflow/lite/micro/tools/make/downloads" / d).is_dir()
    ]
    if missing:
        pytest.skip(f"TFLM_DIR lacks third-party downloads {missing}")
    for tool in ("make", "g++"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH")
    dest = tmp_path_factory.mktemp("tflm") / "tflm"
    # A copy keeps the caller's checkout untouched; -a keeps mtimes, so an existing gen/
    # build is reused and only what the patches touch is rebuilt.
    if shutil.which("cp"):
        subprocess.run(["cp", "-a", str(src_path), str(dest)], check=True)
    else:
        shutil.copytree(src_path, dest, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def installed(tflm_copy: Path) -> Path:
    lines = list(install(str(tflm_copy), False))
    assert any(line.startswith("installed TinySeg") for line in lines), lines
    return tflm_copy


def test_real_checkout_install_is_idempotent(installed: Path) -> None:
    touched = [INSTALL_DIR] + CHANGED
    before = {
        rel: snapshot(installed / rel)
        if (installed / rel).is_dir()
        else (installed / rel).read_bytes()
        for rel in touched
    }
    lines = list(install(str(installed), False))
    assert any(line.startswith("already installed") for line in lines), lines
    after = {
        rel: snapshot(installed / rel)
        if (installed / rel).is_dir()
        else (installed / rel).read_bytes()
        for rel in touched
    }
    assert after == before


@pytest.fixture(scope="module")
def e2e_exe(installed: Path) -> Path:
    try:
        return build_e2e.build(installed)
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))


TFLM_TESTS = [
    "test_kernel_tinyseg_spill_fetching_test",
    "test_kernel_tinyseg_fetching_conv_test",
    "test_kernel_tinyseg_transpose_conv_test",
    "test_kernel_tinyseg_stream_test",
    # upstream tests of the files the patches change
    "test_kernel_transpose_conv_test",
    "test_fake_micro_context_test",
]


@pytest.mark.parametrize("target", TFLM_TESTS)
def test_tflm_make_test_target(e2e_exe: Path, installed: Path, target: str) -> None:
    out = build_e2e.make(installed, target)
    assert "~~~ALL TESTS PASSED~~~" in out, out[-3000:]


@pytest.fixture(scope="module")
def variants() -> dict[str, object]:
    """The optimized Tiny U-Net, and hand-made spills that exercise every Fetching form."""
    g = build_graph(modelio.load_model(TINY_UNET))
    result = optimizer.search_plans(
        g, optimizer.Options(smallest=True, stream=False)
    )  # the spill passes (streaming: below)
    victim = 39  # the 80x120x8 skip tensor the optimizer spills
    cr = cold_ranges(g)[victim]
    whole = apply_spill(g, SpillPlan(victim, cr.start, cr.end, slot=3)).graph
    rows = apply_spill(g, replace(partial_plan(g, victim, cr, 30000), slot=1)).graph

    def fetch_index(graph) -> int:
        return next(op.index for op in graph.operators if op.opcode == customops.FETCHING)

    return {
        "optimized": result.graph,  # Spill + FetchingConv2D + marked TRANSPOSE_CONVs
        "spill_restore": whole,  # Fetching with one operand, no input
        "spill_concat_channels": graph_or_none(
            fuse_concat(whole, fetch_index(whole))
        ),  # Fetching, axis 3
        "partial_rows": rows,  # SPLIT_V + Spill + Fetching + CONCATENATION
        "partial_concat_rows": graph_or_none(
            fuse_concat(rows, fetch_index(rows))
        ),  # Fetching, axis 1
    }


def _write_inputs(path: Path, seed: int) -> Path:
    from tinyseg_plugin.checks.verify import random_inputs

    path.write_bytes(
        b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(TINY_UNET), seed))
    )
    return path


E2E_BATCHES = 2  # inferences per _run_e2e run


def _run_e2e(
    exe: Path,
    model: Path,
    inputs: Path,
    out: Path,
    arena: int | None = None,
    prefix: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
) -> dict[str, int]:
    """Two inferences on the same input (spill slots rewritten and released in between): both
    batches of outputs land in ``out``, so a second inference that differs shows in the comparison.
    ``prefix`` runs the runner under an emulator (build_e2e.QEMU_M7); ``options`` go to the
    runner (--source, --sink)."""
    twice = out.with_name(out.name + ".in")
    twice.write_bytes(inputs.read_bytes() * E2E_BATCHES)
    cwd = None
    if prefix:
        # Semihosting hands the program a command line of at most 255 bytes (newlib's rdimon):
        # short names, relative to the output's directory.
        cwd = out.parent
        for src, name in ((exe, "tinyseg_run"), (model, "model.tflite")):
            link = cwd / name
            link.unlink(missing_ok=True)
            link.symlink_to(Path(src).resolve())
        exe, model, twice, out = (
            Path("./tinyseg_run"),
            Path("model.tflite"),
            Path(twice.name),
            Path(out.name),
        )
    r = subprocess.run(
        [*prefix, str(exe), str(model), str(twice), str(out), "--batches", str(E2E_BATCHES)]
        + (["--arena", str(arena)] if arena else [])
        + list(options),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )
    assert r.returncode == 0, r.stderr
    return {k: int(v) for k, v in (line.split() for line in r.stdout.splitlines() if line)}


# The runner is an x86-64 Makefile build of a TFLM with TinySeg installed, running a
# RecordingMicroInterpreter: the tail profile of that build (host64-make-recording, which
# tests/test_kernel_rules.py checks against the arena probe, plus TinySeg's patches).
E2E_BUILD = BuildProfile("host64-make-recording-tinyseg", 8)


def _assert_as_analyzed(
    got: dict[str, int], model: Path, kernels: str = "reference", build: BuildProfile = E2E_BUILD
) -> None:
    """What TFLM reported for `model` is what `tinyseg analyze` says for the e2e build: the head,
    the tail, and the persistent buffers (the kernels' Init/Prepare allocations, analyze's
    kernel_data, plus the interpreter's input and output pointer arrays)."""
    graph = build_graph(modelio.load_model(model))
    plan = analyze_graph(graph, kernels, build).plan
    assert got["head"] == plan.head, f"{model.name}: head {got['head']}, analyze {plan.head}"
    assert got["tail"] == plan.tail.total, (
        f"{model.name}: tail {got['tail']}, analyze {plan.tail.total}"
    )
    # The io category is the two pointer arrays (8 bytes a pointer, each 16-byte aligned) and the
    # TfLiteTensors with their quantization that TFLM reports on their own lines.
    pointer_arrays = (
        plan.tail.io_tensors - got["persistent_tensors"] - got["persistent_quantization"]
    )
    pointers = build.pointer_bytes * (len(graph.inputs) + len(graph.outputs))
    assert pointers <= pointer_arrays < pointers + 32, (model.name, pointer_arrays)
    assert got["persistent_buffers"] == plan.tail.kernel_data + pointer_arrays, (
        f"{model.name}: persistent buffers {got['persistent_buffers']}, analyze kernel_data "
        f"{plan.tail.kernel_data} + pointer arrays {pointer_arrays}"
    )


@pytest.mark.parametrize(
    "variant",
    ["optimized", "spill_restore", "spill_concat_channels", "partial_rows", "partial_concat_rows"],
)
def test_end_to_end_bit_identical_and_planned_head(
    e2e_exe: Path, variants: dict, tmp_path: Path, variant: str
) -> None:
    graph = variants[variant]
    assert graph is not None
    model = tmp_path / f"{variant}.tflite"
    modelio.save_model(graph.model, model)
    for seed in (0, 1):
        inputs = _write_inputs(tmp_path / f"in{seed}.bin", seed)
        want = _run_e2e(e2e_exe, TINY_UNET, inputs, tmp_path / "want.bin")
        got = _run_e2e(e2e_exe, model, inputs, tmp_path / "got.bin")
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
        _assert_as_analyzed(want, TINY_UNET)
        _assert_as_analyzed(got, model)
        assert got["spills"] == 2  # one per inference, two inferences
        assert got["fetched_bytes"] == got["spilled_bytes"]
    if variant == "optimized":
        assert got["head"] < want["head"]
        assert got["bands"] == 2 * 80  # 80 output rows in bands of 1, twice


def test_streamed_tiny_unet_end_to_end(e2e_exe: Path, tmp_path: Path) -> None:
    """The Tiny U-Net as StreamChain operators (the chains and row spills the search
    picks) runs in TFLM with bit-identical outputs, in under 64,000 B of head and 74,000 B in
    all, and TFLM reports exactly the head, tail and persistent buffers `tinyseg analyze` says."""
    g = build_graph(modelio.load_model(TINY_UNET))
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    chains = [op for op in streamed.operators if op.opcode == customops.STREAM_CHAIN]
    assert len(chains) == len(streamed.operators) >= 2
    row_streams = sum(len(customops.decode(op).spill) for op in chains)
    reads: list[tuple[int, int, int]] = []
    for cost in choice.streamed.chains:
        stream.simulate(
            g, list(cost.ops), frozenset(cost.spilled), frozenset(cost.fetched), [], reads
        )
    model = tmp_path / "streamed.tflite"
    modelio.save_model(streamed.model, model)
    for seed in (0, 1):
        inputs = _write_inputs(tmp_path / f"in{seed}.bin", seed)
        want = _run_e2e(e2e_exe, TINY_UNET, inputs, tmp_path / "want.bin")
        got = _run_e2e(e2e_exe, model, inputs, tmp_path / "got.bin")
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
        _assert_as_analyzed(got, model)
        assert got["spills"] == 2 * row_streams > 0  # every row stream written, both inferences
        assert got["head"] == choice.head <= 64_000 and got["total"] <= 74_000, got
        assert got["head"] * 4 < want["head"]
        assert got["optimized_rows"] == 0  # a reference build: the stages' reference arithmetic
        # the kernel reads storage exactly where stream.simulate's schedule says (the order
        # benchmarks/runtime_table.py replays on the flash models)
        assert got["fetches"] == 2 * len(reads) and got["fetched_bytes"] == 2 * sum(
            stream.row_bytes(g, t) for _, t, _ in reads
        ), got


def test_streamed_activation_stages_end_to_end(e2e_exe: Path, tmp_path: Path) -> None:
    """Standalone RELU (requantizing and not) and RELU6 as StreamChain stages: bit-identical to
    TFLM's own RELU and RELU6 kernels on the unfused model, and TFLM's head, tail and persistent
    buffers are what `tinyseg analyze` says (the stages need no bytes beyond their records)."""
    from tinyseg_plugin.checks.verify import random_inputs

    original = tmp_path / "activations.tflite"
    modelio.save_model(synth.activations_unet(size=24), original)
    g = build_graph(modelio.load_model(original))
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    chains = [op for op in streamed.operators if op.opcode == customops.STREAM_CHAIN]
    assert len(chains) == len(streamed.operators)
    stages = [st.op for op in chains for st in customops.decode(op).stages]
    assert stages.count("RELU") == 2 and stages.count("RELU6") == 2
    model = tmp_path / "streamed.tflite"
    modelio.save_model(streamed.model, model)
    for seed in (0, 1, 2):
        inputs = tmp_path / f"in{seed}.bin"
        inputs.write_bytes(
            b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), seed))
        )
        want = _run_e2e(e2e_exe, original, inputs, tmp_path / "want.bin")
        got = _run_e2e(e2e_exe, model, inputs, tmp_path / "got.bin")
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
        _assert_as_analyzed(want, original)
        _assert_as_analyzed(got, model)
        assert got["head"] == choice.head < want["head"]


def test_streamed_pad_stages_end_to_end(e2e_exe: Path, tmp_path: Path) -> None:
    """PAD (symmetric, asymmetric, height-only and width-only, on the model's input too) in front
    of VALID convolutions, with RELU and RELU6, as StreamChain stages: bit-identical to TFLM's own
    kernels on the unfused model, and TFLM's figures are what `tinyseg analyze` says."""
    from tinyseg_plugin.checks.verify import random_inputs

    original = tmp_path / "padded.tflite"
    modelio.save_model(synth.padded_unet(size=24), original)
    g = build_graph(modelio.load_model(original))
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    chains = [op for op in streamed.operators if op.opcode == customops.STREAM_CHAIN]
    assert len(chains) == len(streamed.operators)
    stages = [st.op for op in chains for st in customops.decode(op).stages]
    assert stages.count("PAD") == 5 and stages.count("RELU") == 2 and stages.count("RELU6") == 2
    model = tmp_path / "streamed.tflite"
    modelio.save_model(streamed.model, model)
    for seed in (0, 1, 2):
        inputs = tmp_path / f"in{seed}.bin"
        inputs.write_bytes(
            b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), seed))
        )
        want = _run_e2e(e2e_exe, original, inputs, tmp_path / "want.bin")
        got = _run_e2e(e2e_exe, model, inputs, tmp_path / "got.bin")
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
        _assert_as_analyzed(want, original)
        _assert_as_analyzed(got, model)
        assert got["head"] == choice.head < want["head"]


def test_streamed_more_stages_end_to_end(e2e_exe: Path, tmp_path: Path) -> None:
    """SUB (different input quantizations, a channel broadcast, a per-channel constant as either
    operand, a fused RELU), LEAKY_RELU, HARD_SWISH, ELU (its lookup table in the persistent
    block), TANH, PADV2 and DEQUANTIZE (float32 model outputs) as StreamChain stages: bit-identical to TFLM's own kernels on the unfused
    model, and TFLM's head, tail and persistent buffers are what `tinyseg analyze` says."""
    from tinyseg_plugin.checks.verify import random_inputs

    MORE_STAGES = {
        "SUB": 4,
        "DEQUANTIZE": 2,
        "TANH": 1,
        "HARD_SWISH": 1,
        "LEAKY_RELU": 1,
        "PADV2": 2,
        "ELU": 1,
    }

    original = tmp_path / "more_stages.tflite"
    modelio.save_model(synth.more_stages_unet(size=24), original)
    g = build_graph(modelio.load_model(original))
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    chains = [op for op in streamed.operators if op.opcode == customops.STREAM_CHAIN]
    assert len(chains) == len(streamed.operators)
    stages = [st.op for op in chains for st in customops.decode(op).stages]
    assert {k: stages.count(k) for k in MORE_STAGES} == MORE_STAGES
    model = tmp_path / "streamed.tflite"
    modelio.save_model(streamed.model, model)
    for seed in (0, 1, 2):
        inputs = tmp_path / f"in{seed}.bin"
        inputs.write_bytes(
            b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), seed))
        )
        want = _run_e2e(e2e_exe, original, inputs, tmp_path / "want.bin")
        got = _run_e2e(e2e_exe, model, inputs, tmp_path / "got.bin")
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
        _assert_as_analyzed(want, original)
        _assert_as_analyzed(got, model)
        assert got["head"] == choice.head < want["head"]


# Streaming's acceptance: each head at most half of the one the project reached before streaming.
HALF_OF_TODAY = {"vnet2d": 262_664, "attention_unet": 422_400, "resunet_a": 2_097_152}


@pytest.mark.parametrize("name", ["vnet2d", "attention_unet", "resunet_a"])
def test_streamed_example_models_end_to_end(
    e2e_exe: Path, example_models: dict, tmp_path: Path, name: str
) -> None:
    """The other example models as `tinyseg optimize` streams them (ADD, MUL with broadcast,
    PRELU, LOGISTIC, RESIZE_NEAREST_NEIGHBOR stages too): bit-identical in TFLM, with the head,
    tail and persistent buffers `tinyseg analyze` says, each head within the streaming target."""
    if name not in example_models:
        pytest.skip("the example models need TensorFlow (make models-deps)")
    from tinyseg_plugin.checks.verify import arena_for, random_inputs

    original = example_models[name]
    g = build_graph(modelio.load_model(original))
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None and choice.head < choice.base_head
    model = tmp_path / f"{name}_streamed.tflite"
    modelio.save_model(choice.streamed.graph.model, model)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(
        b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), 0))
    )
    arena = arena_for(g)  # the original's arena with margin (the runner's default is 4 MB)
    want = _run_e2e(e2e_exe, original, inputs, tmp_path / "want.bin", arena)
    got = _run_e2e(e2e_exe, model, inputs, tmp_path / "got.bin", arena)
    assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
    _assert_as_analyzed(got, model)
    assert got["head"] == choice.head < want["head"]
    print(
        f"{name}: head {want['head']:,} -> {got['head']:,} B (streaming target {HALF_OF_TODAY[name]:,})"
    )
    assert got["head"] <= HALF_OF_TODAY[name]


def _two_skips_spilled() -> tuple[object, object, object]:
    """Two skip tensors spilled and merged into one concatenation: a Fetching with two fetched
    operands, and the same fused into the CONV_2D (FetchingConv2D, bands of 3 rows)."""
    b = synth.ModelBuilder(seed=4)
    x = b.input([1, 16, 16, 4])
    a = b.conv(x, 8)
    c = b.conv(a, 8)
    y = b.pool(c)
    for _ in range(4):
        y = b.conv(y, 8)
    out = b.conv(b.concat([a, b.transpose_conv(y, 8), c]), 8)
    g = build_graph(b.build([out]))
    crs = cold_ranges(g)
    g1 = apply_spill(g, SpillPlan(a, crs[a].start, crs[a].end, slot=0)).graph
    c1 = next(t.index for t in g1.tensors if t.name == g.tensors[c].name)
    crs1 = cold_ranges(g1)
    g2 = apply_spill(g1, SpillPlan(c1, crs1[c1].start, crs1[c1].end, slot=1)).graph
    while True:
        fused = next(
            (
                f
                for op in g2.operators
                if op.opcode == customops.FETCHING
                for f in [graph_or_none(fuse_concat(g2, op.index))]
                if f is not None
            ),
            None,
        )
        if fused is None:
            break
        g2 = fused
    fetch = next(op for op in g2.operators if op.opcode == customops.FETCHING)
    assert len(customops.decode(fetch).fetched) == 2
    return g, g2, graph_or_none(fuse_conv(g2, ConvFusion(fetch.index, 3)))


@pytest.mark.parametrize(
    "case", ["two_fetched_concat", "two_fetched_conv", "float32_unet", "random_unet", "vnet_like"]
)
def test_end_to_end_synthetic(e2e_exe: Path, tmp_path: Path, case: str) -> None:
    """Forms the Tiny U-Net does not have: several fetched operands in one operator, float32,
    other shapes, split elementwise operators under an offline layout."""
    if case.startswith("two_fetched"):
        g, concat, conv = _two_skips_spilled()
        optimized = concat if case == "two_fetched_concat" else conv
    else:
        # random_unet(5): two spills, one of them partial (SPLIT_V + Fetching). The optimizer
        # reduces some seeds (1, for one) without any TinySeg operator.
        # vnet_like: operator splitting, a spill, and an offline arena layout (OfflineMemoryAllocation).
        model = {
            "float32_unet": synth.tiny_unet_like(dtype="FLOAT32"),
            "random_unet": synth.random_unet(5),
            "vnet_like": synth.vnet_like(),
        }[case]
        g = build_graph(model)
        optimized = optimizer.search_plans(
            g, optimizer.Options(smallest=True, stream=False)
        ).graph  # the spill passes' forms
    assert any(customops.is_tinyseg_op(op) for op in optimized.operators)
    original, variant = tmp_path / "original.tflite", tmp_path / "variant.tflite"
    modelio.save_model(g.model, original)
    modelio.save_model(optimized.model, variant)
    inputs = tmp_path / "in.bin"
    from tinyseg_plugin.checks.verify import random_inputs

    inputs.write_bytes(
        b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), 3))
    )
    want = _run_e2e(e2e_exe, original, inputs, tmp_path / "want.bin")
    got = _run_e2e(e2e_exe, variant, inputs, tmp_path / "got.bin")
    assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
    _assert_as_analyzed(want, original)
    _assert_as_analyzed(got, variant)
    assert got["head"] < want["head"]


def _band_case_graphs(case, band_rows: int):
    """test_band_exact's geometry as a real model: the fetched operand is an activation spilled
    over its cold range, fused into the CONV_2D as FetchingConv2D with bands of band_rows."""
    b = synth.ModelBuilder(dtype="INT8", seed=case.seed, act_zero_point=case.zero_point)
    x = b.input([1, case.h, case.w, 3])
    skip = b.conv(x, case.c_fetch, k=1)
    res = b.conv(b.conv(x, case.c_res, k=1), case.c_res, k=1)
    cat = b.concat([skip, res] if case.fetched_first else [res, skip], axis=3)
    y = b.conv(
        cat,
        case.c_out,
        k=case.k,
        stride=case.stride,
        padding=case.padding,
        relu=case.relu,
        dilation=case.dilation,
    )
    g = build_graph(b.build([y]))
    cr = cold_ranges(g)[skip]
    spilled = apply_spill(g, SpillPlan(skip, cr.start, cr.end, slot=0)).graph
    fetch = next(op.index for op in spilled.operators if op.opcode == customops.FETCHING)
    concat = graph_or_none(fuse_concat(spilled, fetch))
    assert concat is not None
    fetch = next(op.index for op in concat.operators if op.opcode == customops.FETCHING)
    fused = graph_or_none(fuse_conv(concat, ConvFusion(fetch, band_rows)))
    assert fused is not None and any(
        op.opcode == customops.FETCHING_CONV_2D for op in fused.operators
    )
    return g, fused


@pytest.mark.parametrize("case", test_band_exact.CASES, ids=str)
def test_fetching_conv_band_walk_in_tflm(e2e_exe: Path, tmp_path: Path, case) -> None:
    """The FetchingConv2D kernel itself, on every geometry of tests/test_band_exact.py and band
    heights from one row to the whole output: bit-identical to CONCATENATION + CONV_2D, its
    band buffer (clipped to the input height) as the planner says, bands and reused rows as
    tinyseg/band.h's walk gives them. A band taller than the output is no fusion (the kernel
    refuses it in Prepare)."""
    out_h = test_band_exact._out_h(case)
    original = tmp_path / "original.tflite"
    inputs = tmp_path / "in.bin"
    want = None
    with pytest.raises(AssertionError):
        _band_case_graphs(case, out_h + 5)  # fuse_conv skips it
    for band_rows in sorted({1, 2, 3, max(1, out_h // 2), out_h}):
        g, fused = _band_case_graphs(case, band_rows)
        if want is None:
            modelio.save_model(g.model, original)
            from tinyseg_plugin.checks.verify import random_inputs

            inputs.write_bytes(
                b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), 5))
            )
            want = _run_e2e(e2e_exe, original, inputs, tmp_path / "want.bin")
            _assert_as_analyzed(want, original)
        variant = tmp_path / f"bands{band_rows}.tflite"
        modelio.save_model(fused.model, variant)
        got = _run_e2e(e2e_exe, variant, inputs, tmp_path / "got.bin")
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes(), (
            band_rows
        )
        _assert_as_analyzed(got, variant)  # the head: the band buffer as the planner sizes it
        assert got["bands"] == 2 * -(-out_h // band_rows), band_rows  # two inferences
        assert got["fetched_bytes"] == got["spilled_bytes"], (
            band_rows
        )  # every image row fetched once


# ---------------------------------------------------------------- the same with CMSIS-NN kernels


def _transpose_conv_stage_rows(model: Path) -> int:
    """Output rows of the model's streamed TRANSPOSE_CONV stages that read a filter row (row y
    reads filter row y % stride; the rows past the kernel hold the bias only and keep the
    reference code) in one _run_e2e run: the rows a CMSIS-NN build computes with
    arm_transpose_conv_s8."""
    g = build_graph(modelio.load_model(model))
    rows = 0
    for op in g.operators:
        if op.opcode != customops.STREAM_CHAIN:
            continue
        o = customops.decode(op)
        shapes = [g.tensors[t].shape if t >= 0 else () for t in list(op.inputs) + list(op.outputs)]
        shapes += [t.shape for t in o.tensors]
        for stage in o.stages:
            if stage.op == "TRANSPOSE_CONV":
                stride, filter_h = dict(stage.fields)["strideH"], shapes[stage.inputs[1]][1]
                rows += sum(1 for y in range(shapes[stage.outputs[0]][1]) if y % stride < filter_h)
    return rows * E2E_BATCHES


# The int16 stages whose rows a CMSIS-NN build computes with CMSIS-NN's s16 functions, as TFLM's
# CMSIS-NN kernels do for int16: CONV_2D (without groups), DEPTHWISE_CONV_2D and the pools on the
# band, ADD and MUL whose operands are rows of the output's shape (no broadcast).
S16_STAGES = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"})


def _s16_stage_rows(model: Path) -> int:
    """Output rows of the model's streamed int16 stages that run CMSIS-NN's s16 functions in a
    CMSIS-NN build (S16_STAGES; ADD and MUL without broadcast), in one run of one batch. A
    window of padding rows only would keep the reference code: the models checked have none."""
    g = build_graph(modelio.load_model(model))
    rows = 0
    for op in g.operators:
        if op.opcode != customops.STREAM_CHAIN:
            continue
        o = customops.decode(op)
        tensors = [
            (g.tensors[t].shape, g.tensors[t].dtype, g.tensors[t].is_constant)
            if t >= 0
            else ((), "", True)
            for t in list(op.inputs) + list(op.outputs)
        ]
        tensors += [(t.shape, t.dtype, False) for t in o.tensors]
        for stage in o.stages:
            shape, dtype, _ = tensors[stage.outputs[0]]
            if dtype != "INT16":
                continue
            if stage.op == "CONV_2D":
                grouped = tensors[stage.inputs[1]][0][3] != tensors[stage.inputs[0]][0][3]
                rows += 0 if grouped else shape[1]
            elif stage.op in S16_STAGES:
                rows += shape[1]
            elif stage.op in ("ADD", "MUL") and all(
                tensors[k][0] == shape and not tensors[k][2] for k in stage.inputs[:2]
            ):
                rows += shape[1]
    return rows


@pytest.fixture(scope="module")
def e2e_cmsis(installed: Path) -> Path:
    downloads = installed / "tensorflow/lite/micro/tools/make/downloads"
    if not ((downloads / "cmsis").is_dir() and (downloads / "cmsis_nn").is_dir()):
        pytest.skip("TFLM_DIR lacks the cmsis and cmsis_nn downloads")
    try:
        return build_e2e.build(installed, "cmsis_nn")
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))


@pytest.mark.parametrize(
    "target", ["test_kernel_tinyseg_transpose_conv_test", "test_kernel_tinyseg_stream_test"]
)
def test_cmsis_nn_kernel_test(e2e_cmsis: Path, installed: Path, target: str) -> None:
    """The marked TRANSPOSE_CONV's and StreamChain's kernel tests in the host CMSIS-NN build
    (CMSIS-NN's plain C paths: the stages' s8 and s16 rows against TFLM's CMSIS-NN kernels)."""
    out = build_e2e.make(installed, target, kernels="cmsis_nn")
    assert "~~~ALL TESTS PASSED~~~" in out, out[-3000:]


def test_cmsis_nn_end_to_end(e2e_cmsis: Path, e2e_exe: Path, tmp_path: Path) -> None:
    """Optimized for CMSIS-NN, run with CMSIS-NN: same outputs as the original with CMSIS-NN
    (and, for this model, as the reference kernels), head as the planner's cmsis-nn rules say;
    streamed, the chains' convolution stages run CMSIS-NN's arithmetic."""
    g = build_graph(modelio.load_model(TINY_UNET))
    inputs = _write_inputs(tmp_path / "in.bin", 0)
    want = _run_e2e(e2e_cmsis, TINY_UNET, inputs, tmp_path / "want.bin")
    _run_e2e(e2e_exe, TINY_UNET, inputs, tmp_path / "reference.bin")
    assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "reference.bin").read_bytes()
    _assert_as_analyzed(want, TINY_UNET, "cmsis-nn")
    # spilling and fusion, then streaming (StreamChain's convolution stages run CMSIS-NN's
    # arithmetic on their bands, its other stages the reference arithmetic)
    for streaming in (False, True):
        model = tmp_path / f"opt_cmsis_{streaming}.tflite"
        result = optimizer.search_plans(
            g, optimizer.Options(smallest=True, kernel_set="cmsis-nn", stream=streaming)
        )
        assert (customops.STREAM_CHAIN in {op.opcode for op in result.graph.operators}) == streaming
        modelio.save_model(result.graph.model, model)
        got = _run_e2e(e2e_cmsis, model, inputs, tmp_path / "got.bin")
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
        _assert_as_analyzed(got, model, "cmsis-nn")
        assert got["head"] < want["head"] and (not streaming or got["head"] <= 66_000)
        # the streamed convolution stages ran CMSIS-NN's arithmetic, in the scratch the plan gave them,
        # every row of the TRANSPOSE_CONV stages included
        assert (got["optimized_rows"] > 0) == streaming, got
        tconv_rows = _transpose_conv_stage_rows(model)
        assert (tconv_rows > 0) == streaming and got[
            "optimized_transpose_conv_rows"
        ] == tconv_rows, got
    # a model streamed for the reference kernels runs in a CMSIS-NN build too (stages whose
    # CMSIS-NN buffer the plan has no room for keep the reference arithmetic): same outputs
    model = tmp_path / "streamed_for_reference.tflite"
    modelio.save_model(
        optimizer.search_plans(g, optimizer.Options(smallest=True)).graph.model, model
    )
    got = _run_e2e(e2e_cmsis, model, inputs, tmp_path / "got.bin")
    assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
    # its TRANSPOSE_CONV stages (stride = kernel, SAME) have room for CMSIS-NN's accumulator row:
    # it is the reference stage's one output row of int32
    assert got["optimized_transpose_conv_rows"] == _transpose_conv_stage_rows(model) > 0, got


def test_cmsis_nn_float32_more_stages(e2e_cmsis: Path, tmp_path: Path) -> None:
    """The float32 SUB, TANH, HARD_SWISH, LEAKY_RELU, PRELU, ELU, PADV2 and RESIZE_BILINEAR stages
    (integer and non-integer factors, both flags) in the host CMSIS-NN build: the streamed model's
    outputs identical to the original's there (TFLM's CMSIS-NN kernels compute float32 with the
    reference code, and so do the stages), head as `tinyseg analyze` says."""
    from tinyseg_plugin.checks.verify import random_inputs

    for k, (out, align, half) in enumerate(
        [
            (None, False, True),
            (None, False, False),
            ((25, 21), False, True),
            ((17, 13), True, False),
        ]
    ):
        original = tmp_path / f"float_more_{k}.tflite"
        made = synth.float_more_stages(out=out, align_corners=align, half_pixel_centers=half)
        modelio.save_model(made, original)
        g = build_graph(modelio.load_model(original))
        choice = stream_search.choose_streaming(g, "cmsis-nn", kernel_only=True)
        assert choice.streamed is not None
        streamed = choice.streamed.graph
        assert all(op.opcode == customops.STREAM_CHAIN for op in streamed.operators)
        model = tmp_path / f"streamed_{k}.tflite"
        modelio.save_model(streamed.model, model)
        inputs = tmp_path / f"in{k}.bin"
        inputs.write_bytes(
            b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), k))
        )
        want = _run_e2e(e2e_cmsis, original, inputs, tmp_path / "want.bin")
        got = _run_e2e(e2e_cmsis, model, inputs, tmp_path / "got.bin")
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes(), k
        _assert_as_analyzed(got, model, "cmsis-nn")
        assert got["head"] < want["head"], k


# ---------------------------------------------------------------- the kernel tests on a Cortex-M7


CORTEX_M7 = build_e2e.CORTEX_M7
# The runner built for the Cortex-M7 (ILP32, RecordingMicroInterpreter, TinySeg installed).
M7_BUILD = BuildProfile("cortex-m-recording-tinyseg", 4)


def _cortex_m7_skip_reason(tflm: Path, kernels: str) -> str | None:
    """Why the Cortex-M7 kernel tests cannot run here, or None. Never downloads: without
    downloads/gcc_embedded TFLM's cortex_m_qemu makefile would fetch a toolchain."""
    absent = [t for t in ("arm-none-eabi-g++", "qemu-arm") if shutil.which(t) is None]
    if absent:
        return f"tools not on PATH: {absent}"
    needed = ["gcc_embedded"] + (["cmsis", "cmsis_nn"] if kernels == "cmsis_nn" else [])
    downloads = tflm / "tensorflow/lite/micro/tools/make/downloads"
    missing = [d for d in needed if not (downloads / d).is_dir()]
    if missing:
        return f"TFLM_DIR lacks the downloads {missing} a Cortex-M7 {kernels} build needs"
    return None


@pytest.mark.parametrize("target", TFLM_TESTS)
@pytest.mark.parametrize("kernels", ["reference", "cmsis_nn"])
def test_cortex_m7_kernel_test(installed: Path, kernels: str, target: str) -> None:
    """The same make test targets built for a Cortex-M7 (TFLM's cortex_m_qemu target: soft
    float, semihosting) and run under qemu-arm by TFLM's test script: 32-bit pointers, the
    OpData sizes of the contract, the arena scratch as the Spill staging buffer. The first
    case builds microlite for the target (reusing TFLM_DIR's gen/ objects); the rest reuse it."""
    reason = _cortex_m7_skip_reason(installed, kernels)
    if reason:
        pytest.skip(reason)
    try:
        out = build_e2e.make(installed, *CORTEX_M7, target, kernels=kernels)
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))
    assert "test_with_qemu.sh arm cortex-m7" in out, out[-3000:]  # really the M7 build, in qemu
    assert "~~~ALL TESTS PASSED~~~" in out, out[-3000:]


def test_cortex_m7_storage_regions(installed: Path, e2e_exe: Path, tmp_path: Path) -> None:
    """Slots in two RAM regions and the NOR flash simulator on the Cortex-M7 (32-bit OpData, the
    region packed into it): each optimized random U-Net of tests/test_storage_regions.py, planned
    for the Cortex-M rules and its slots moved to regions 1..3, runs under qemu-arm bit-identically
    to the original on the host, each region holding exactly its slots (about 6 s)."""
    import test_storage_regions as regions_test

    reason = _cortex_m7_skip_reason(installed, "reference")
    if reason:
        pytest.skip(reason)
    try:
        exe = build_e2e.build(installed, "reference", target=CORTEX_M7)
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))
    for case in sorted(regions_test.CASES):
        for mapping in sorted(regions_test.MAPPINGS):
            regions_test.check_regions(
                e2e_exe, exe, tmp_path, case, mapping, prefix=build_e2e.QEMU_M7, profile="cortex-m"
            )


@pytest.mark.parametrize("kernels", ["reference", "cmsis_nn"])
def test_cortex_m7_end_to_end(installed: Path, e2e_exe: Path, kernels: str, tmp_path: Path) -> None:
    """On the target: the Tiny U-Net, optimized without and with streaming for the
    Cortex-M planner rules, and with --stream-io (its frame through the runner's row source, its
    mask through its row sink), runs whole in TFLM built for a Cortex-M7 (tinyseg_run under
    qemu-arm, model and data through semihosting), with the outputs of the original on the host's
    reference kernels, and TFLM's head, tail and persistent buffers equal to `tinyseg analyze
    --build-profile cortex-m` for that build."""
    reason = _cortex_m7_skip_reason(installed, kernels)
    if reason:
        pytest.skip(reason)
    if shutil.which(build_e2e.QEMU_M7[0]) is None:
        pytest.skip("qemu-arm is not on PATH")
    try:
        exe = build_e2e.build(installed, kernels, target=CORTEX_M7)
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))
    runtime = "cmsis-nn" if kernels == "cmsis_nn" else "reference"
    g = build_graph(modelio.load_model(TINY_UNET))
    inputs = _write_inputs(tmp_path / "in.bin", 3)
    _run_e2e(e2e_exe, TINY_UNET, inputs, tmp_path / "want.bin")  # the host, reference kernels
    want = (tmp_path / "want.bin").read_bytes()
    original = _run_e2e(exe, TINY_UNET, inputs, tmp_path / "m7.bin", prefix=build_e2e.QEMU_M7)
    assert (tmp_path / "m7.bin").read_bytes() == want
    _assert_as_analyzed(original, TINY_UNET, runtime, M7_BUILD)
    for streaming in (False, True):
        result = optimizer.search_plans(
            g,
            optimizer.Options(
                smallest=True, kernel_set=runtime, build_profile="cortex-m", stream=streaming
            ),
        )
        assert (customops.STREAM_CHAIN in {op.opcode for op in result.graph.operators}) == streaming
        model = tmp_path / f"m7_{streaming}.tflite"
        modelio.save_model(result.graph.model, model)
        got = _run_e2e(exe, model, inputs, tmp_path / "got.bin", prefix=build_e2e.QEMU_M7)
        assert (tmp_path / "got.bin").read_bytes() == want, (kernels, streaming)
        _assert_as_analyzed(got, model, runtime, M7_BUILD)
        assert got["head"] < original["head"] and got["spills"] > 0
        assert (got["optimized_rows"] > 0) == (streaming and kernels == "cmsis_nn"), got
        tconv_rows = _transpose_conv_stage_rows(model) if kernels == "cmsis_nn" else 0
        assert got["optimized_transpose_conv_rows"] == tconv_rows, got
        assert (tconv_rows > 0) == (streaming and kernels == "cmsis_nn"), got
        if streaming:
            assert got["head"] <= (64_000 if kernels == "reference" else 66_000), got
            assert got["total"] <= 74_000, got
            print(
                f"\nstreamed Tiny U-Net on the Cortex-M7 ({runtime}): head {got['head']} + tail "
                f"{got['tail']} = {got['head'] + got['tail']} B; stage rows by CMSIS-NN per "
                f"inference {got['optimized_rows'] // E2E_BATCHES}, of them TRANSPOSE_CONV "
                f"{tconv_rows // E2E_BATCHES}"
            )
    _stream_io_on_m7(exe, g, runtime, inputs, want, tmp_path)


def _stream_io_on_m7(exe: Path, g, runtime: str, inputs: Path, want: bytes, tmp_path: Path) -> None:
    """The Tiny U-Net optimized with --stream-io: the frame comes in through the runner's row
    source and the mask goes out through its row sink (--source, --sink), as a camera and a
    display hand them over; outputs the original's, head and persistent as analyzed."""
    result = optimizer.search_plans(
        g,
        optimizer.Options(
            stream_io=True, smallest=True, kernel_set=runtime, build_profile="cortex-m"
        ),
    )
    model = tmp_path / "m7_stream_io.tflite"
    modelio.save_model(result.graph.model, model)
    sources, sinks = real_kernels.row_streams(result.graph)
    assert list(sources) == [0] and list(sinks) == [0]
    got = _run_e2e(
        exe,
        model,
        inputs,
        tmp_path / "got.bin",
        prefix=build_e2e.QEMU_M7,
        options=tuple(real_kernels.stream_options(sources, sinks)),
    )
    assert (tmp_path / "got.bin").read_bytes() == want, (runtime, "stream_io")
    _assert_as_analyzed(got, model, runtime, M7_BUILD)
    assert got["source_rows"] == sources[0].rows * E2E_BATCHES, got
    assert got["sink_rows"] == sinks[0].rows * E2E_BATCHES, got
    frame = g.tensors[g.inputs[0]].nbytes
    print(
        f"\nstream-io Tiny U-Net on the Cortex-M7 ({runtime}): head {got['head']} + tail "
        f"{got['tail']} = {got['head'] + got['tail']} B (input {frame} B)"
    )


@pytest.mark.parametrize("name", ["vnet2d", "attention_unet"])
def test_cortex_m7_cmsis_nn_streamed_example_models(
    installed: Path, example_models: dict, tmp_path: Path, name: str
) -> None:
    """V-Net 2D and the Attention U-Net streamed for CMSIS-NN on the Cortex-M (ADD, MUL, PRELU,
    LOGISTIC, RESIZE_NEAREST_NEIGHBOR stages besides convolutions and pools) run whole on the
    Cortex-M7 under QEMU with the CMSIS-NN kernels: outputs identical to the original's there, the
    stages' CMSIS-NN arithmetic used, and TFLM's head, tail and persistent buffers as analyzed."""
    if name not in example_models:
        pytest.skip("the example models need TensorFlow (make models-deps)")
    reason = _cortex_m7_skip_reason(installed, "cmsis_nn")
    if reason:
        pytest.skip(reason)
    from tinyseg_plugin.checks.verify import arena_for, random_inputs

    try:
        exe = build_e2e.build(installed, "cmsis_nn", target=CORTEX_M7)
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))
    original = example_models[name]
    g = build_graph(modelio.load_model(original))
    choice = stream_search.choose_streaming(g, "cmsis-nn", "cortex-m", kernel_only=True)
    assert choice.streamed is not None
    model = tmp_path / f"{name}_streamed.tflite"
    modelio.save_model(choice.streamed.graph.model, model)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(
        b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), 1))
    )
    arena = arena_for(g)
    want = _run_e2e(exe, original, inputs, tmp_path / "want.bin", arena, prefix=build_e2e.QEMU_M7)
    want_bytes = (tmp_path / "want.bin").read_bytes()
    got = _run_e2e(exe, model, inputs, tmp_path / "got.bin", arena, prefix=build_e2e.QEMU_M7)
    assert (tmp_path / "got.bin").read_bytes() == want_bytes
    _assert_as_analyzed(got, model, "cmsis-nn", M7_BUILD)
    assert got["head"] == choice.head < want["head"] and got["optimized_rows"] > 0, got
    assert got["optimized_transpose_conv_rows"] == _transpose_conv_stage_rows(model), got


@pytest.mark.parametrize("kernels", ["reference", "cmsis_nn"])
def test_cortex_m7_more_stages_end_to_end(installed: Path, kernels: str, tmp_path: Path) -> None:
    """The SUB, DEQUANTIZE, TANH, HARD_SWISH, LEAKY_RELU, PADV2 and ELU stages built for a Cortex-M7
    (TFLM's cortex_m_qemu target, soft float: DEQUANTIZE's double arithmetic and ELU's float table
    included) with the reference and the CMSIS-NN kernels: the streamed more_stages_unet's outputs
    identical to the unfused model's there, on 3 random inputs, and TFLM's figures as `tinyseg
    analyze` says."""
    reason = _cortex_m7_skip_reason(installed, kernels)
    if reason:
        pytest.skip(reason)
    from tinyseg_plugin.checks.verify import random_inputs

    try:
        exe = build_e2e.build(installed, kernels, target=CORTEX_M7)
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))
    runtime = "cmsis-nn" if kernels == "cmsis_nn" else "reference"
    original = tmp_path / "more_stages.tflite"
    modelio.save_model(synth.more_stages_unet(size=24), original)
    g = build_graph(modelio.load_model(original))
    choice = stream_search.choose_streaming(g, runtime, "cortex-m", kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    assert all(op.opcode == customops.STREAM_CHAIN for op in streamed.operators)
    stages = [st.op for op in streamed.operators for st in customops.decode(op).stages]
    assert all(
        stages.count(k)
        for k in ("SUB", "DEQUANTIZE", "TANH", "HARD_SWISH", "LEAKY_RELU", "PADV2", "ELU")
    )
    model = tmp_path / "streamed.tflite"
    modelio.save_model(streamed.model, model)
    for seed in (0, 1, 2):
        inputs = tmp_path / f"in{seed}.bin"
        inputs.write_bytes(
            b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), seed))
        )
        want = _run_e2e(exe, original, inputs, tmp_path / "want.bin", prefix=build_e2e.QEMU_M7)
        got = _run_e2e(exe, model, inputs, tmp_path / "got.bin", prefix=build_e2e.QEMU_M7)
        assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
        _assert_as_analyzed(want, original, runtime, M7_BUILD)
        _assert_as_analyzed(got, model, runtime, M7_BUILD)
        assert got["head"] == choice.head < want["head"]


@pytest.mark.parametrize("kernels", ["reference", "cmsis_nn"])
@pytest.mark.parametrize(
    "name",
    [
        "float_stages_unet",
        "bilinear_seg",
        "float_more_stages",
        "int16_stages_chain",
        "int16_unet_chain",
        "int16_unet_prelu",
        "se_seg",
        "se_seg_int16",
        "channel_pad_chain",
        "mnv3_seg",
        "mnv3_seg_float",
        "keras_unet_float",
        "keras_unet_up3",
        "keras_unet_up3_float",
        "seg_tutorial",
        "int16_unet_up3",
    ],
)
def test_cortex_m7_float32_and_bilinear_stages(
    installed: Path,
    kernels: str,
    name: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The float32 stages (with QUANTIZE float32 -> int8 and DEQUANTIZE feeding a float32 stage;
    float32 SUB, TANH, HARD_SWISH, LEAKY_RELU, PRELU, ELU, PADV2 and RESIZE_BILINEAR by a
    non-integer factor with half-pixel centres), the int8 RESIZE_BILINEAR stage (half-pixel
    centres, a non-integer factor) and the int16 (16x8) stages (whose unfused operators run
    CMSIS-NN's s16 kernels in the CMSIS-NN build; int16_unet_chain adds TRANSPOSE_CONV and PADV2,
    int16_unet_prelu PRELU and a TRANSPOSE_CONV with an int16 bias) and the MUL reading a squeeze-and-excitation
    gate whole after a chain that ends at the squeeze's MEAN (se_seg, int8 and int16), PAD and PADV2 of channels
    (channel_pad_chain) and the MobileNetV3-style segmenter of examples/models/build.py (mnv3_seg
    and its float32 twin mnv3_seg_float, with TensorFlow), the float32 Keras U-Net
    keras_unet_float of the same builders and the Keras U-Net whose decoder is
    Conv2DTranspose(3, strides=2) (keras_unet_up3, int8 and float32; seg_tutorial, TensorFlow's
    segmentation-tutorial model, whose pix2pix decoder has five; int16_unet_up3 the int16
    U-Net with a 3x3 TRANSPOSE_CONV and an int16 bias), built for a Cortex-M7 with the reference and the CMSIS-NN kernels: the
    streamed model's outputs identical to the original's there, and TFLM's figures as
    `tinyseg analyze` says."""
    reason = _cortex_m7_skip_reason(installed, kernels)
    if reason:
        pytest.skip(reason)
    from tinyseg_plugin.checks.verify import random_inputs

    try:
        exe = build_e2e.build(installed, kernels, target=CORTEX_M7)
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))
    runtime = "cmsis-nn" if kernels == "cmsis_nn" else "reference"
    original = tmp_path / f"{name}.tflite"
    if name.startswith(("mnv3_seg", "keras_unet", "seg_tutorial")):
        original = built_examples(tmp_path_factory, [name])[name]
    else:
        made = {
            "float_stages_unet": synth.float_stages_unet,
            "bilinear_seg": lambda: synth.bilinear_seg(out=(40, 52)),
            "float_more_stages": lambda: synth.float_more_stages(out=(25, 21)),
            "int16_stages_chain": synth.int16_stages_chain,
            "int16_unet_chain": synth.int16_unet_chain,
            "int16_unet_prelu": lambda: synth.int16_unet_chain(tconv_bias="INT16", prelu=True),
            "int16_unet_up3": lambda: synth.int16_unet_chain(tconv_bias="INT16", tconv_kernel=3),
            "se_seg": synth.se_seg,
            "se_seg_int16": lambda: synth.se_seg(dtype="INT16"),
            "channel_pad_chain": synth.channel_pad_chain,
        }[name]()
        modelio.save_model(made, original)
    g = build_graph(modelio.load_model(original))
    choice = stream_search.choose_streaming(g, runtime, "cortex-m", kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    stages = {
        st.op
        for op in streamed.operators
        if op.opcode == customops.STREAM_CHAIN
        for st in customops.decode(op).stages
    }
    wanted = {
        "bilinear_seg": "RESIZE_BILINEAR",
        "float_more_stages": "PRELU",
        "int16_stages_chain": "DEPTHWISE_CONV_2D",
        "int16_unet_chain": "TRANSPOSE_CONV",
        "int16_unet_prelu": "PRELU",
        "se_seg": "MUL",
        "se_seg_int16": "MUL",
        "channel_pad_chain": "PADV2",
        "mnv3_seg": "RESIZE_BILINEAR",
        "mnv3_seg_float": "RESIZE_BILINEAR",
        "keras_unet_float": "TRANSPOSE_CONV",
        "keras_unet_up3": "TRANSPOSE_CONV",
        "keras_unet_up3_float": "TRANSPOSE_CONV",
        "seg_tutorial": "TRANSPOSE_CONV",
        "int16_unet_up3": "TRANSPOSE_CONV",
    }
    assert wanted.get(name, "QUANTIZE") in stages
    if name in (
        "se_seg",
        "se_seg_int16",
        "mnv3_seg",
        "mnv3_seg_float",
    ):  # a chain before a gate ends at the squeeze's MEAN
        assert {"MEAN", "MUL"} <= stages, stages
    model = tmp_path / "streamed.tflite"
    modelio.save_model(streamed.model, model)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(
        b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(original), 0))
    )
    want = _run_e2e(exe, original, inputs, tmp_path / "want.bin", prefix=build_e2e.QEMU_M7)
    got = _run_e2e(exe, model, inputs, tmp_path / "got.bin", prefix=build_e2e.QEMU_M7)
    assert (tmp_path / "want.bin").read_bytes() == (tmp_path / "got.bin").read_bytes()
    _assert_as_analyzed(got, model, runtime, M7_BUILD)
    assert got["head"] == choice.head < want["head"]
    if (
        "int16" in name
    ):  # every row of the s16 stages ran CMSIS-NN's s16 function, in the plan's scratch
        s16_rows = _s16_stage_rows(model) * E2E_BATCHES
        assert s16_rows > 0 and got["optimized_rows"] == (s16_rows if kernels == "cmsis_nn" else 0)


def test_cortex_m7_refuses_every_hostile_body(installed: Path, tmp_path: Path, counts) -> None:
    """The crafted bodies of tests/hostile_models.py on the target: TFLM built for a Cortex-M7
    (reference kernels, tinyseg_run under qemu-arm) refuses each mutation in Prepare with the
    kernel's reason, and the unmutated bases run and compute the original's outputs, as on the
    host (tests/test_hostile_bodies.py runs the same models in the sanitizer build)."""
    import hostile_models

    from tinyseg_plugin.checks import real_kernels

    reason = _cortex_m7_skip_reason(installed, "reference")
    if reason:
        pytest.skip(reason)
    try:
        exe = build_e2e.build(installed, "reference", target=CORTEX_M7)
    except build_e2e.BuildError as exc:
        pytest.fail(str(exc))
    models = hostile_models.generate(tmp_path / "hostile")
    g = build_graph(modelio.load_model(TINY_UNET))
    (tmp_path / "in.bin").write_bytes(bytes(sum(g.tensors[t].nbytes for t in g.inputs)))
    (tmp_path / "tinyseg_run").symlink_to(exe.resolve())

    def run(model: Path) -> subprocess.CompletedProcess:
        # Semihosting passes at most 255 bytes of command line: short names, relative to tmp_path.
        link = tmp_path / "model.tflite"
        link.unlink(missing_ok=True)
        link.symlink_to(model.resolve())
        return subprocess.run(
            [*build_e2e.QEMU_M7, "./tinyseg_run", "model.tflite", "in.bin", "out.bin"]
            + ["--batches", "1"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            check=False,
        )

    r = run(TINY_UNET)
    assert r.returncode == 0, r.stderr[-2000:]
    want = (tmp_path / "out.bin").read_bytes()
    for base in ("base_stream", "base_fetch"):
        r = run(models[base])
        assert r.returncode == 0, (base, r.stderr[-2000:])
        assert (tmp_path / "out.bin").read_bytes() == want, base
    missed = {}
    for mu in hostile_models.MUTATIONS:
        r = run(models[mu.name])
        why = real_kernels.failure_reason(r.stderr + r.stdout)
        if r.returncode <= 0 or why in ("AllocateTensors failed", "Invoke failed", "no message"):
            missed[mu.name] = f"exit {r.returncode}: {why}"
    counts(
        f"hostile models on the Cortex-M7 (qemu-arm): {len(hostile_models.MUTATIONS)} mutations, "
        f"refused in Prepare with the kernel's reason: {len(hostile_models.MUTATIONS) - len(missed)}"
    )
    assert not missed, missed
