"""Runtime profiles (``--runtime``): which kernel implementation each operator gets in each
TFLM tree.

Always: operator by operator, each profile gives exactly the rules of the implementation its
tree compiles (the upstream reference and CMSIS-NN rules that tests/test_kernel_rules.py checks
against real upstream builds), the Nicla's library plans TRANSPOSE_CONV like reference, ESP-NN
operators are reported unknown, and the CLI option.

With TINYSEG_FORK_PROBE (make test sets it) and ../shared/third_party: the Arduino library's own TFLM (2023-02)
is built on the host (tests/fork_probe) and its head compared with the profile's on the example
model, the shared models and 50 random U-Nets. Trees not built here, and why: esp-tflite-micro
needs the esp-nn component (its kernels call esp_nn_* functions; esp-nn is not in the snapshot)
and the ESP-IDF toolchain; Zephyr's module and the Edge Impulse SDK are not in
../shared/third_party (their profiles reuse the upstream CMSIS-NN rules minus TRANSPOSE_CONV).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import synth

from tinyseg_plugin import cli
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model
from tinyseg_plugin.memory.kernels import (
    BUILD_PROFILES,
    KERNEL_SETS,
    BuildProfile,
    KernelRules,
    default_build_profile,
)
from tinyseg_plugin.memory.kernels.profiles import ARDUINO_CMSIS_NN, FORK_KERNEL_SETS
from tinyseg_plugin.memory.planner import plan_graph
from tinyseg_plugin.memory.runtimes import KERNEL_SET_NAMES

ROOT = Path(__file__).resolve().parent.parent
TINY_UNET = ROOT / "examples" / "models" / "tiny_unet.tflite"


def test_runtime_names() -> None:
    assert KERNEL_SET_NAMES == (
        "reference",
        "cmsis-nn",
        "arduino",
        "zephyr",
        "edge-impulse",
        "esp-idf",
    )
    assert (
        default_build_profile("reference") == "host64"
        and default_build_profile("arduino") == "cortex-m"
    )


def _graphs():
    yield build_graph(load_model(str(TINY_UNET)))
    for seed in range(20):
        yield build_graph(synth.random_unet(seed))


@pytest.mark.parametrize("runtime", ["arduino", "zephyr", "edge-impulse", "esp-idf"])
def test_each_operator_gets_its_trees_kernel(runtime: str) -> None:
    prof = FORK_KERNEL_SETS[runtime]
    for build_profile in ("host64", "cortex-m"):
        rules = {
            k: KernelRules(k, BUILD_PROFILES[build_profile])
            for k in ("reference", "cmsis-nn", runtime)
        }
        for g in _graphs():
            for op in g.operators:
                got = rules[runtime].scratch_requests(g, op)
                if op.opcode in prof.optimized_ops and prof.optimized is None:
                    assert got == [] and op.opcode in rules[runtime].unknown_ops
                    continue
                want = rules[
                    "cmsis-nn" if op.opcode in prof.optimized_ops else "reference"
                ].scratch_requests(g, op)
                assert got == want, (runtime, op.opcode)
                kset = "cmsis-nn" if op.opcode in prof.optimized_ops else "reference"
                assert rules[runtime].persistent_bytes(g, op) == rules[kset].persistent_bytes(
                    g, op
                ), op.opcode


def test_arduino_plans_transpose_conv_like_reference() -> None:
    """The Nicla Vision's library runs the reference TRANSPOSE_CONV: one int32 accumulator
    over the output, not CMSIS-NN's buffers. For Tiny U-Net that is the head itself."""
    assert "TRANSPOSE_CONV" not in ARDUINO_CMSIS_NN
    g = build_graph(load_model(str(TINY_UNET)))
    heads = {
        r: plan_graph(g, r, "cortex-m").head for r in ("reference", "cmsis-nn", "arduino", "zephyr")
    }
    assert heads["arduino"] == heads["reference"] == heads["zephyr"] == 307_200
    assert heads["cmsis-nn"] == 230_400
    tc = [op for op in g.operators if op.opcode == "TRANSPOSE_CONV"]
    assert tc
    for op in tc:
        out = g.tensors[op.outputs[0]]
        assert KernelRules("arduino", BUILD_PROFILES["cortex-m"]).scratch_requests(g, op) == [
            out.elements * 4
        ]


def test_esp_idf_reports_esp_nn_operators_as_unknown() -> None:
    p = plan_graph(build_graph(load_model(str(TINY_UNET))), "esp-idf", "cortex-m")
    assert set(p.unknown_ops) == {"CONV_2D", "MAX_POOL_2D"}


def test_cli_runtime_and_deprecated_alias(capsys: pytest.CaptureFixture) -> None:
    import json

    assert cli.main(["analyze", str(TINY_UNET), "--kernel-set", "arduino", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["head"], d["build_profile"], d["kernel_set"]) == (
        307_200,
        "cortex-m",
        "arduino",
    )
    assert cli.main(["analyze", str(TINY_UNET), "--kernels", "cmsis-nn", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["head"], d["build_profile"]) == (230_400, "host64")
    assert cli.main(["analyze", str(TINY_UNET), "--kernel-set", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--kernel-set" in err and err.strip().count("\n") == 0
    help_text = cli.build_parser()._subparsers._group_actions[0].choices["analyze"].format_help()
    assert (
        "--kernel-set" in help_text
        and "--kernels" not in help_text
        and "--runtime" not in help_text
    )
    assert all(k in KERNEL_SETS for k in KERNEL_SET_NAMES)


# ---------------------------------------------------------------- against the Arduino library itself

FORK_PROBE_ENV = "TINYSEG_FORK_PROBE"
TAIL_TOLERANCE = 0.10  # tests/test_kernel_rules.py's bound for the reference tail estimate
THIRD_PARTY = ROOT.parent / "shared" / "third_party"
ARDUINO_LIBRARY = "tflite-micro-arduino-examples-7948b85"


def _probe_models(tmp_path: Path, examples: dict[str, Path]) -> list[Path]:
    """The example models, the shared models and 50 random U-Nets (synth.py)."""
    from tinyseg_plugin.ir.modelio import model_to_bytes

    shared = ROOT.parent / "shared" / "models"
    paths = list(examples.values()) + sorted(shared.glob("*.tflite"))
    for seed in range(50):
        p = tmp_path / f"unet{seed}.tflite"
        p.write_bytes(model_to_bytes(synth.random_unet(seed)))
        paths.append(p)
    return paths


@pytest.mark.skipif(
    not os.environ.get(FORK_PROBE_ENV),
    reason=f"set {FORK_PROBE_ENV}=1 (or =DIR to keep the build in DIR; make test does): builds "
    "the Arduino library's TFLM on the host (about 90 s on 2 cores)",
)
def test_arduino_profile_against_the_library_built_on_the_host(
    tmp_path_factory: pytest.TempPathFactory, example_models: dict
) -> None:
    """The `arduino` profile's head equals what the library's own TFLM (2023-02, CMSIS-NN
    kernels, built for x86: no ARM_MATH_DSP, so the profile is taken with dsp=False) reports
    for every model (the example models, the shared models, 50 random U-Nets), and the tail
    estimate (upstream's interpreter structures, RecordingMicroInterpreter) is within the
    bound the upstream tail is held to."""
    import dataclasses
    import subprocess
    import sys

    unpack = THIRD_PARTY / "unpack.sh"
    if not unpack.is_file():
        pytest.skip(f"{unpack} not present")
    where = os.environ[FORK_PROBE_ENV]
    # With a DIR the library is unpacked there too (unpack.sh is idempotent), so the sources keep
    # their mtimes and a second run rebuilds nothing.
    base = tmp_path_factory.mktemp("third_party") if where == "1" else Path(where)
    r = subprocess.run(
        ["bash", str(unpack), ARDUINO_LIBRARY, str(base)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        pytest.fail(f"unpack.sh: {r.stderr.strip()}", pytrace=False)
    sys.path.insert(0, str(ROOT / "tests" / "fork_probe"))
    import build_fork_probe as bfp

    try:
        exe = bfp.build_arduino_probe(Path(r.stdout.strip()) / "src", base / "build")
    except bfp.ProbeError as exc:
        pytest.fail(str(exc), pytrace=False)
    host = dataclasses.replace(FORK_KERNEL_SETS["arduino"], dsp=False)
    mismatches = []
    worst = (0.0, "")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(KERNEL_SETS, "arduino", host)
        for path in _probe_models(tmp_path_factory.mktemp("models"), example_models):
            real = bfp.run_probe(exe, path)
            plan = plan_graph(
                build_graph(load_model(str(path))),
                "arduino",
                BuildProfile("host64-make-recording", 8),
            )
            print(
                f"{path.name}: head {plan.head} (library {real['head']}), tail estimate {plan.tail.total} "
                f"(library {real['tail']})"
            )
            if plan.head != real["head"]:
                mismatches.append(f"{path.name}: head {plan.head} vs {real['head']}")
            err = abs(plan.tail.total - real["tail"]) / real["tail"]
            worst = max(worst, (err, path.name))
            if err > TAIL_TOLERANCE:  # the same bound the upstream tail estimate is held to
                mismatches.append(f"{path.name}: tail {plan.tail.total} vs {real['tail']}")
    print(
        f"tail: worst error {worst[0]:.1%} ({worst[1]}); the estimate follows upstream TFLM, "
        "whose interpreter keeps a little more than the library's 2023 one"
    )
    assert not mismatches, "\n".join(mismatches)
