"""The cache of the original's outputs (checks/output_cache.py): keyed by the model's bytes, the
input and the interpreter; a damaged file is ignored and rewritten; a wrong optimized model is still
caught when the original's outputs come from the cache."""

from __future__ import annotations

import copy

import numpy as np
from test_verify import _respilled

from tinyseg_plugin.checks import interpreter, output_cache
from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import build_graph


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
