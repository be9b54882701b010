"""scripts/tflm-pch-cxx.sh, the compiler `make test` puts in front of g++: a source TFLM's make
compiles gets a precompiled header of the flatbuffers schema, made from the tree at hand, and the
objects are the plain compile's; every other compile passes through.

Run: pytest tests/test_tflm_pch.py   (TFLM_DIR=/path/to/tflite-micro for the real sources)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = ROOT / "scripts" / "tflm-pch-cxx.sh"
SCHEMA = "tensorflow/lite/schema/schema_generated.h"
MAKEFILE = "tensorflow/lite/micro/tools/make/Makefile"
TFLM_FLAGS = ["-std=c++17", "-O2", "-I.", "-DTF_LITE_STATIC_MEMORY"]

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("flock") is None, reason="needs g++ and flock"
)


def _env(tmp_path: Path) -> dict[str, str]:
    """PATH with the wrapper first under the name g++, no ccache (each compile is a real one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "g++"
    if not link.exists():
        link.symlink_to(WRAPPER)
    env = dict(os.environ)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        TINYSEG_PCH_DIR=str(tmp_path / "pch"),
        TINYSEG_PCH_LOG=str(tmp_path / "pch.log"),
        CCACHE_DISABLE="1",
    )
    return env


def _tree(root: Path, value: int) -> Path:
    """A stand-in TFLM tree: the Makefile, a schema whose constant is ``value``, a program."""
    (root / MAKEFILE).parent.mkdir(parents=True)
    (root / MAKEFILE).write_text("# stand-in\n")
    (root / SCHEMA).parent.mkdir(parents=True)
    (root / SCHEMA).write_text(f"#pragma once\nconstexpr int kSchemaValue = {value};\n")
    (root / "main.cc").write_text(
        f'#include "{SCHEMA}"\n#include <cstdio>\n'
        'int main() { std::printf("%d\\n", kSchemaValue); return 0; }\n'
    )
    return root


def _log(tmp_path: Path) -> list[list[str]]:
    p = tmp_path / "pch.log"
    return [line.split() for line in p.read_text().splitlines()] if p.exists() else []


def _build_and_run(
    tree: Path, env: dict[str, str], flags: list[str]
) -> subprocess.CompletedProcess:
    c = subprocess.run(
        ["g++", *flags, "-H", "-c", "main.cc", "-o", "main.o"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert c.returncode == 0, c.stderr
    link = subprocess.run(
        ["g++", "main.o", "-o", "main"], cwd=tree, env=env, capture_output=True, text=True
    )
    assert link.returncode == 0, link.stderr
    run = subprocess.run([str(tree / "main")], capture_output=True, text=True, timeout=30)
    return subprocess.CompletedProcess(c.args, 0, run.stdout, c.stderr)


def test_each_tree_compiles_with_the_header_of_its_own_schema(tmp_path: Path) -> None:
    """Two trees whose schemas differ get two headers and print their own constant; a copy of
    the first at another path shares its header (same compiler, flags and header text)."""
    env = _env(tmp_path)
    a = _tree(tmp_path / "a", 1)
    b = _tree(tmp_path / "b", 2)
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    results = {
        name: _build_and_run(t, env, TFLM_FLAGS) for name, t in (("a", a), ("b", b), ("copy", copy))
    }
    assert {n: r.stdout for n, r in results.items()} == {"a": "1\n", "b": "2\n", "copy": "1\n"}
    for r in results.values():  # -H marks a precompiled header the compiler used with "!"
        assert any(
            line.startswith("! ") and line.endswith("tflm_schema.h.gch")
            for line in r.stderr.splitlines()
        ), r.stderr
    keys = [k for k, _src in _log(tmp_path)]
    assert len(keys) == 3 and keys[0] == keys[2] != keys[1], keys
    assert (
        sorted(p.name for p in (tmp_path / "pch").glob("*/tflm_schema.h.gch"))
        == ["tflm_schema.h.gch"] * 2
    )


@pytest.mark.parametrize(
    "case",
    ["not a TFLM compile", "preprocess only", "not a TFLM tree", "no header folder", "two sources"],
)
def test_every_other_compile_passes_through(tmp_path: Path, case: str) -> None:
    """Compiles the wrapper does not recognise run as the plain compiler would, without a header."""
    env = _env(tmp_path)
    tree = _tree(tmp_path / "t", 7)
    flags = list(TFLM_FLAGS)
    args = ["-c", "main.cc", "-o", "main.o"]
    if case == "not a TFLM compile":
        flags.remove("-DTF_LITE_STATIC_MEMORY")
    elif case == "preprocess only":
        args = ["-E", "main.cc", "-o", "main.i"]
    elif case == "not a TFLM tree":
        (tree / MAKEFILE).unlink()
    elif case == "no header folder":
        (tmp_path / "pch").write_text("a file where the folder would be\n")
    elif case == "two sources":
        (tree / "other.cc").write_text("int other() { return 1; }\n")
        args = ["-c", "main.cc", "other.cc"]
    r = subprocess.run(["g++", *flags, *args], cwd=tree, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _log(tmp_path) == []
    assert not list(tmp_path.glob("pch/*/tflm_schema.h.gch"))


def _sections(obj: Path) -> list[str]:
    """objdump's dump of each section (contents, code, relocations by symbol name), sorted: two
    objects are the same code and data when these are equal, whatever order the sections are in."""
    out = subprocess.run(
        ["objdump", "-s", "-d", "-r", "-w", "-z", str(obj)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()[3:]
    blocks: list[list[str]] = []
    for line in out:
        if line.startswith(("Disassembly of section", "Contents of section")) or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return sorted("\n".join(b) for b in blocks)


def test_sections_tell_a_different_object_apart(tmp_path: Path) -> None:
    """The comparison below can fail: two objects of different constants differ."""
    env = _env(tmp_path)
    for value in (1, 2):
        tree = _tree(tmp_path / f"t{value}", value)
        _build_and_run(tree, env, ["-O0", "-I."])
    assert _sections(tmp_path / "t1" / "main.o") != _sections(tmp_path / "t2" / "main.o")


TFLM_SOURCES = [  # two kernels (one set of flags, one header to make)
    "obj/kernels/tensorflow/lite/micro/kernels/add_n.o",
    "obj/kernels/tensorflow/lite/micro/kernels/detection_postprocess.o",
]


def test_tflm_objects_are_the_plain_compiles(tmp_path: Path) -> None:
    """Two of TFLM's sources (host, reference kernels) built by TFLM's make through the wrapper
    and without it: each used a precompiled header, and each object has the plain compile's
    sections (detection_postprocess's come in another order, the same bytes). The CMSIS-NN build of
    the same sources uses the same headers (its -D and -I flags the schema does not name)."""
    tflm = os.environ.get("TFLM_DIR")
    if not tflm or not (Path(tflm) / MAKEFILE).is_file():
        pytest.skip("set TFLM_DIR to a TFLM checkout with its downloads")
    sys.path.insert(0, str(ROOT))
    from tinyseg_plugin.checks import real_kernels

    env = _env(tmp_path)
    # Without TINYSEG_PCH_DIR, as make test's own wrapper (first on PATH there) passes it through.
    plain_env = {k: v for k, v in env.items() if k not in ("TINYSEG_PCH_DIR", "TINYSEG_PCH_LOG")}
    plain_env["PATH"] = env["PATH"].split(os.pathsep, 1)[1]
    gens = {"": f"linux_x86_64_{real_kernels.BUILD_TYPE}_gcc"}
    gens["cmsis_nn"] = gens[""].replace("_gcc", "_cmsis_nn_gcc")
    keys: dict[str, list[str]] = {}
    for name, e, kernels in (("plain", plain_env, ""), ("pch", env, ""), ("pch", env, "cmsis_nn")):
        base = tmp_path / name
        r = subprocess.run(
            [
                "make",
                "-f",
                MAKEFILE,
                f"BUILD_TYPE={real_kernels.BUILD_TYPE}",
                real_kernels.NO_SIGNAL,
                f"BASE_GENDIR={base}",
                *([f"OPTIMIZED_KERNEL_DIR={kernels}"] if kernels else []),
                "-j2",
                *(f"{base}/{gens[kernels]}/{o}" for o in TFLM_SOURCES),
            ],
            cwd=tflm,
            env=e,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        if name == "pch":
            keys[kernels] = [k for k, _src in sorted(_log(tmp_path), key=lambda x: x[1])]
            (tmp_path / "pch.log").unlink()
    assert len(keys[""]) == len(TFLM_SOURCES) and keys[""] == keys["cmsis_nn"], keys
    for o in TFLM_SOURCES:
        a, b = tmp_path / "plain" / gens[""] / o, tmp_path / "pch" / gens[""] / o
        assert _sections(a) == _sections(b), o
