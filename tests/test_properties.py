"""Properties over random models with what real converted models carry (synth.random_real,
synth.wide_branches): several graph inputs and outputs, an output also read inside the graph,
unreferenced tensors, 100+ parallel branches, DEQUANTIZE of float16 weights, hybrid operators,
RESHAPE and TRANSPOSE next to concatenations, concatenation along height and width.

- analyze equals the real interpreter wherever TFLM runs the model (models TFLM refuses in Prepare are
  excluded from the comparison, and the sample must hold both kinds);
- `tinyseg optimize` never exits 1 and never raises (a traceback), exits 2 only for a model TFLM
  refuses, never writes a model that fails verification, and is never worse than the input.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import synth

from tinyseg_plugin import cli
from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes, save_model
from tinyseg_plugin.memory.planner import plan_graph

SEEDS = range(24)


def _models():
    for seed in SEEDS:
        yield f"real{seed}", synth.random_real(seed)
    for kind in ("hybrid_fc", "hybrid_conv", "dequantize"):
        yield f"real_{kind}", synth.random_real(100, refused=kind)
    yield "wide_conv", synth.wide_branches(1, 110, "conv")
    yield "wide_dequantize_int8", synth.wide_branches(1, 110, "dequantize-int8")
    yield "wide_dequantize_float16", synth.wide_branches(1, 110, "dequantize")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[tuple[str, Path, int | None]]:
    """(name, file, real TFLM head or None where TFLM refuses the model)."""
    d = tmp_path_factory.mktemp("models")
    out = []
    for name, m in _models():
        p = d / f"{name}.tflite"
        data = save_model(m, p)
        try:
            head = interpreter.arena_usage(data).head
        except TinySegError as exc:
            assert "TFLM cannot" in str(exc)
            head = None
        out.append((name, p, head))
    return out


def test_the_sample_holds_models_tflm_runs_and_models_it_refuses(corpus) -> None:
    runs = [n for n, _, h in corpus if h is not None]
    refused = [n for n, _, h in corpus if h is None]
    assert len(runs) >= 15 and len(refused) >= 2, (runs, refused)
    assert {
        "wide_dequantize_float16",
        "real_hybrid_fc",
        "real_hybrid_conv",
        "real_dequantize",
    } <= set(refused)
    assert "wide_conv" in runs


def test_analyze_equals_the_interpreter_wherever_it_runs(corpus) -> None:
    for name, p, head in corpus:
        if head is None:
            continue
        assert plan_graph(build_graph(load_model(p))).head == head, name


def test_optimize_never_fails_badly_never_worse_always_verified(corpus, tmp_path, capsys) -> None:
    for name, p, head in corpus:
        out = tmp_path / f"{name}.opt.tflite"
        rc = cli.main(
            ["optimize", str(p), "-o", str(out), "-q", "--runs", "1"]
        )  # an exception here is a traceback
        err = capsys.readouterr().err
        assert "Traceback" not in err, name
        if head is None:
            assert rc == 2 and not out.exists(), (name, rc, err)
            assert err.strip().splitlines()[-1].startswith("tinyseg: error:"), name
            continue
        assert rc == 0, (name, rc, err)
        original, optimized = build_graph(load_model(p)), build_graph(load_model(out))
        assert plan_graph(optimized).head <= head, name
        assert verify(original, optimized, runs=1, seed=7).identical, name


def test_optimized_wide_graph_is_far_below_the_input(corpus) -> None:
    """Not just "never worse": the reorder finds the interleaved order on 220 operators."""
    from tinyseg_plugin.transforms.optimizer import Options, search_plans

    p = next(p for n, p, _ in corpus if n == "wide_conv")
    r = search_plans(
        build_graph(load_model(p)), Options(smallest=True, stream=False)
    )  # the wheel runs no StreamChain
    assert r.plan.head * 10 < r.original.head
    assert interpreter.arena_usage(model_to_bytes(r.graph.model)).head == r.plan.head


def test_corpus_benchmark_gives_a_row_per_model_even_for_a_bad_file(tmp_path) -> None:
    """benchmarks/corpus.py runs each model in a child: a file that cannot be read is a row, not a stop."""
    import subprocess
    import sys

    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 64)
    good = tmp_path / "good.tflite"
    save_model(synth.random_real(0), good)
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus.py"
    p = subprocess.run(
        [sys.executable, str(script), str(bad), str(good)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith(("bad.tflite", "good.tflite"))]
    assert len(rows) == 2
    assert "yes" in rows[1].split()  # exact
    assert "bad.tflite: cannot read" in p.stdout


def test_streaming_is_never_worse_than_without_and_always_verifies(corpus) -> None:
    """The streaming property: on every model TFLM runs (the random real-like sample, and random
    U-Nets, which do stream), the head --target min writes with streaming is at most the head it
    writes without, and every streamed plan, written or only considered, is bit-identical to the
    original (lowered in the wheel)."""
    from tinyseg_plugin.transforms.optimizer import Options, search_plans

    models = [(n, load_model(p)) for n, p, head in corpus if head is not None]
    models += [(f"random_unet{s}", synth.random_unet(s, max_depth=3)) for s in range(4)]
    streamed = []
    for name, m in models:
        with_stream = search_plans(build_graph(m), Options(smallest=True))
        without = search_plans(build_graph(m), Options(smallest=True, stream=False))
        assert with_stream.plan.head <= without.plan.head, name
        chained = [c for c in [with_stream, *with_stream.considered] if c.chains]
        if chained:
            streamed.append(name)
            assert verify(build_graph(m), chained[0].graph, runs=1, seed=3).identical, name
    assert len(streamed) >= 10, streamed  # exercised, not vacuous (21 of 28 stream at 875a7aa)
