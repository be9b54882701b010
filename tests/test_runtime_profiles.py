"""Runtime profiles (``--runtime``): which kernel implementation each operator gets in each
TFLM tree, checked operator by operator against the two upstream kernel sets whose rules
tests/test_kernel_rules.py checks against real TFLM builds.

What is not checked here, and why: a host build of the forks' own TFLM with the arena probe
(tests/tflm_probe). The Arduino library's TFLM (2023-02) has no make build (arduino-cli
compiles it; its CMSIS-NN needs the library's third_party/cmsis_nn); esp-tflite-micro needs
the ESP-IDF toolchain and the esp-nn component (not in the snapshot); Zephyr and Edge Impulse
are not in ../shared/third_party. docs/runtime.md, "Runtime profiles".
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tinyseg_plugin import cli, synth
from tinyseg_plugin.graph import build_graph
from tinyseg_plugin.kernels import KERNEL_SETS, RUNTIMES, TARGETS, KernelRules, default_arch
from tinyseg_plugin.kernels.profiles import ARDUINO_CMSIS_NN, PROFILES
from tinyseg_plugin.modelio import load_model
from tinyseg_plugin.planner import plan_graph

ROOT = Path(__file__).resolve().parent.parent
TINY_UNET = ROOT / "examples" / "models" / "tiny_unet.tflite"


def test_runtime_names() -> None:
    assert RUNTIMES == ("reference", "cmsis-nn", "arduino", "zephyr", "edge-impulse", "esp-idf")
    assert default_arch("reference") == "host64" and default_arch("arduino") == "cortex-m"


def _graphs():
    yield build_graph(load_model(str(TINY_UNET)))
    for seed in range(20):
        yield build_graph(synth.random_unet(seed))


@pytest.mark.parametrize("runtime", ["arduino", "zephyr", "edge-impulse", "esp-idf"])
def test_each_operator_gets_its_trees_kernel(runtime: str) -> None:
    prof = PROFILES[runtime]
    for arch in ("host64", "cortex-m"):
        rules = {k: KernelRules(k, TARGETS[arch]) for k in ("reference", "cmsis-nn", runtime)}
        for g in _graphs():
            for op in g.operators:
                got = rules[runtime].scratch_requests(g, op)
                if op.opcode in prof.optimized_ops and prof.optimized is None:
                    assert got == [] and op.opcode in rules[runtime].unknown_ops
                    continue
                want = rules["cmsis-nn" if op.opcode in prof.optimized_ops else "reference"].scratch_requests(g, op)
                assert got == want, (runtime, op.opcode)
                kset = "cmsis-nn" if op.opcode in prof.optimized_ops else "reference"
                assert (rules[runtime].persistent_bytes(g, op) == rules[kset].persistent_bytes(g, op)), op.opcode


def test_arduino_plans_transpose_conv_like_reference() -> None:
    """The Nicla Vision's library runs the reference TRANSPOSE_CONV: one int32 accumulator
    over the output, not CMSIS-NN's buffers. For Tiny U-Net that is the head itself."""
    assert "TRANSPOSE_CONV" not in ARDUINO_CMSIS_NN
    g = build_graph(load_model(str(TINY_UNET)))
    heads = {r: plan_graph(g, r, "cortex-m").head for r in ("reference", "cmsis-nn", "arduino", "zephyr")}
    assert heads["arduino"] == heads["reference"] == heads["zephyr"] == 307_200
    assert heads["cmsis-nn"] == 230_400
    tc = [op for op in g.operators if op.opcode == "TRANSPOSE_CONV"]
    assert tc
    for op in tc:
        out = g.tensors[op.outputs[0]]
        assert KernelRules("arduino", TARGETS["cortex-m"]).scratch_requests(g, op) == [out.elements * 4]


def test_esp_idf_reports_esp_nn_operators_as_unknown() -> None:
    p = plan_graph(build_graph(load_model(str(TINY_UNET))), "esp-idf", "cortex-m")
    assert set(p.unknown_ops) == {"CONV_2D", "MAX_POOL_2D"}


def test_cli_runtime_and_deprecated_alias(capsys: pytest.CaptureFixture) -> None:
    import json

    assert cli.main(["analyze", str(TINY_UNET), "--runtime", "arduino", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # (JSON keys "runtime"/"arch"; older layouts call them "kernels"/"target")
    assert (d["head"], d.get("arch", d.get("target")), d.get("runtime", d.get("kernels"))) == \
        (307_200, "cortex-m", "arduino")
    assert cli.main(["analyze", str(TINY_UNET), "--kernels", "cmsis-nn", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["head"], d.get("arch", d.get("target"))) == (230_400, "host64")
    assert cli.main(["analyze", str(TINY_UNET), "--runtime", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--runtime" in err and err.strip().count("\n") == 0
    assert "--kernels" not in cli.build_parser().format_help()
    assert all(k in KERNEL_SETS for k in RUNTIMES)
