"""Shared fixtures: the real models and the bundled Tiny U-Net."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODELS = ROOT.parent / "shared" / "models"
TINY_UNET = ROOT / "examples" / "models" / "tiny_unet.tflite"

# Real TFLM arena figures of the shared models (their README: tflite-micro wheel, reference kernels).
SHARED_FIGURES = {
    "person_detect.tflite": (55_296, 85_264),
    "keyword_scrambled.tflite": (672, 15_152),
    "micro_speech_quantized.tflite": (5_968, 7_584),
}


def stage_ops(graph) -> list[str]:
    """The operator of every StreamChain stage of ``graph``, in order."""
    from tinyseg_plugin.contract import customops

    return [
        st.op
        for op in graph.operators
        if op.opcode == customops.STREAM_CHAIN
        for st in customops.decode(op).stages
    ]


def dumps_options(m: dict) -> bytes:
    """FlexBuffers bytes for custom options read with ``flexbuffers.Loads`` and edited: each
    stage's "quant" table written back as the typed vector of int32 the kernel reads in place
    (Loads gives a list, which Dumps would write untyped)."""
    import array

    from flatbuffers import flexbuffers

    for st in m.get("stages", []) if isinstance(m, dict) else []:
        if isinstance(st, dict) and isinstance(st.get("quant"), list):
            st["quant"] = array.array("i", st["quant"])
    return bytes(flexbuffers.Dumps(m))


def spilled_skip_graphs(dtype: str):
    """(original, spilled): a convolution whose output is a skip read four operators later, and
    the same graph with that skip spilled (Spill after its first reader, Fetching before the ADD's
    convolution): the smallest graph fuse_conv applies to."""
    import synth

    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.memory.coldrange import cold_ranges
    from tinyseg_plugin.transforms.passes.spill import SpillPlan, apply_spill

    b = synth.ModelBuilder(dtype=dtype, seed=2)
    x = b.input([1, 8, 8, 4])
    a = b.conv(x, 4)
    y = a
    for _ in range(3):
        y = b.conv(y, 4)
    g = build_graph(b.build([b.add(y, b.conv(a, 4))]))
    cr = cold_ranges(g)[a]
    return g, apply_spill(g, SpillPlan(a, cr.start, cr.end, slot=0)).graph


def shared_model(name: str) -> Path:
    p = SHARED_MODELS / name
    if not p.exists():
        pytest.skip(f"{p} not present (shared/ is checked out beside the repository)")
    return p


EXAMPLE_MODELS = ("tiny_unet", "vnet2d", "attention_unet", "resunet_a")


def built_examples(tmp_path_factory: pytest.TempPathFactory, names: list[str]) -> dict[str, Path]:
    """Models of examples/models/build.py (pinned TensorFlow: `make models-deps`; make test installs
    it), each built once per run: in a folder the pytest-xdist workers share, under a lock, so the
    test files that need one model do not each pay TensorFlow for it. Without TensorFlow, the
    caller's test skips."""
    import fcntl
    import importlib.util
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("the example models need TensorFlow (make models-deps)")
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # every worker's basetemp lives in the run's one
    out = shared / "example_models"
    out.mkdir(exist_ok=True)
    with open(shared / "example_models.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        todo = [n for n in names if not (out / f"{n}.tflite").exists()]
        if todo:
            p = subprocess.run(
                [sys.executable, str(ROOT / "examples" / "models" / "build.py")]
                + ["--models", ",".join(todo), "--out", str(out)],
                capture_output=True,
                text=True,
                timeout=3600,
            )
            assert p.returncode == 0, p.stderr[-2000:]
    return {n: out / f"{n}.tflite" for n in names}


@pytest.fixture(scope="session")
def example_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The four example models: the committed Tiny U-Net, the others built once per run
    (built_examples). Without TensorFlow only the Tiny U-Net is there."""
    import importlib.util

    found = {n: ROOT / "examples" / "models" / f"{n}.tflite" for n in EXAMPLE_MODELS}
    found = {n: p for n, p in found.items() if p.exists()}
    missing = [n for n in EXAMPLE_MODELS if n not in found]
    if not missing or importlib.util.find_spec("tensorflow") is None:
        return found
    return found | built_examples(tmp_path_factory, missing)


@pytest.fixture(autouse=True)
def _own_output_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """Each test starts with an empty cache of the original's outputs (checks/output_cache.py), so a
    test that counts TFLM runs or checks a verdict does not depend on which tests ran before it."""
    monkeypatch.setenv("TINYSEG_OUTPUT_CACHE_DIR", str(tmp_path_factory.mktemp("outputs")))


@pytest.fixture
def tiny_unet() -> Path:
    assert TINY_UNET.exists(), "examples/models/tiny_unet.tflite is committed with the repository"
    return TINY_UNET


# TFLM builds the suite shares: the arena probes (tests/test_kernel_rules.py) build microlite in
# TFLM_DIR/gen/ for each kernel set and target; every later copy of TFLM_DIR (the real-kernel
# check's cached tree, tests/test_tflm_runtime.py's installed copy) keeps those objects' mtimes and
# rebuilds only what the installer changed. So the probes run first: on a fresh machine this saves
# a whole microlite build per copy (about six minutes each on two cores).
BUILDS_FIRST = (
    "test_kernel_rules.py::test_reference_tail_matches_real_builds",
    "test_kernel_rules.py::test_cmsis_nn_head_matches_real_builds",
)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list
) -> None:
    def first(item) -> bool:
        return any(key in item.nodeid for key in BUILDS_FIRST)

    items[:] = [i for i in items if first(i)] + [i for i in items if not first(i)]


# Figures a suite must show in the run's output (hostile inputs refused, faults survived): tests
# record a line with the `counts` fixture and the terminal summary prints them, passed or not.
# Under pytest-xdist each worker hands its lines to the controller when it finishes.
_COUNTS: list[str] = []
_WORKER_KEY = "tinyseg_counts"


@pytest.fixture(scope="session")
def counts() -> Callable[[str], None]:
    return _COUNTS.append


class _WorkerCounts:
    """The controller's side of pytest-xdist: collect each worker's lines."""

    @pytest.hookimpl
    def pytest_testnodedown(self, node, error) -> None:
        _COUNTS.extend(getattr(node, "workeroutput", {}).get(_WORKER_KEY, []))


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_WorkerCounts(), "tinyseg-worker-counts")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker
        session.config.workeroutput[_WORKER_KEY] = list(_COUNTS)


def pytest_terminal_summary(terminalreporter) -> None:
    if _COUNTS:
        terminalreporter.section("counts")
        for line in _COUNTS:
            terminalreporter.write_line(line)
