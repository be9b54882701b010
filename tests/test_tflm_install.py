"""`tinyseg tflm install` on every TFLM layout a user deploys with, from the snapshots in
../shared/third_party (unpacked by unpack.sh into a pytest tmp dir; skipped without them):

* upstream tflite-micro (tflm-90b983c), and the same tree as it was before 2026-02 (no
  sources.inc: the fragment is placed before the OPTIMIZED_KERNEL_DIR specialisation);
* the Arduino_TensorFlowLite library (tflite-micro-arduino-examples-7948b85, TFLM of 2023-02);
* the ESP-IDF component (esp-tflite-micro-99f49e1, -std=gnu++14 -Werror);
* Zephyr's module and the Edge Impulse SDK as minimal trees with their layout (zephyr/module.yml;
  edge-impulse-sdk/ include prefix, a transpose_conv.cc holding a second implementation behind #if),
  built here from the upstream snapshot's files.

Each install is checked for: only the changes that tree needs, idempotence, --check writing
nothing, the refusal of a tree whose target file was edited (naming the layout, every
problem, and changing nothing), and -- the point of it all -- our kernels and the patched
TRANSPOSE_CONV compiling inside the tree with the tree's own flags (host g++, compile only:
the trees' full builds need their toolchains/SDKs, see docs/runtime.md).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import schema_pch

from tinyseg_plugin.deploy import tflm_install
from tinyseg_plugin.deploy.tflm_install import INSTALL_DIR, STAMP, detect_tree_layout, install
from tinyseg_plugin.errors import TinySegError

ROOT = Path(__file__).resolve().parent.parent
THIRD_PARTY = ROOT.parent / "shared" / "third_party"
UPSTREAM, ARDUINO, ESP = (
    "tflm-90b983c",
    "tflite-micro-arduino-examples-7948b85",
    "esp-tflite-micro-99f49e1",
)
TC = "tensorflow/lite/micro/kernels/transpose_conv.cc"


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="session")
def pristine(tmp_path_factory: pytest.TempPathFactory):
    """NAME -> a read-only unpacked snapshot (copy it before installing)."""
    unpack = THIRD_PARTY / "unpack.sh"
    if not unpack.is_file():
        pytest.skip(f"{unpack} not present (../shared is checked out beside the repository)")
    base = tmp_path_factory.mktemp("third_party")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            r = subprocess.run(
                ["bash", str(unpack), name, str(base)], capture_output=True, text=True, timeout=600
            )
            if r.returncode != 0:
                pytest.skip(f"unpack.sh {name}: {r.stderr.strip()}")
            cache[name] = Path(r.stdout.strip())
        return cache[name]

    return get


def copy_tree(src: Path, dest: Path, subdirs: tuple[str, ...] = ()) -> Path:
    """A writable copy (of only `subdirs` when given: the full upstream tree is large)."""
    if not subdirs:
        shutil.copytree(src, dest, symlinks=True)
        return dest
    for s in subdirs:
        shutil.copytree(src / s, dest / s, symlinks=True)
    return dest


UPSTREAM_PARTS = ("tensorflow/lite", "tensorflow/compiler/mlir/lite", "signal")


@pytest.fixture
def upstream(pristine, tmp_path: Path) -> Path:
    return copy_tree(pristine(UPSTREAM), tmp_path / "tflm", UPSTREAM_PARTS)


@pytest.fixture
def arduino(pristine, tmp_path: Path) -> Path:
    src = pristine(ARDUINO)
    dest = tmp_path / "Arduino_TensorFlowLite"
    dest.mkdir()
    shutil.copy2(src / "library.properties", dest)
    shutil.copytree(src / "src", dest / "src", symlinks=True)
    return dest


@pytest.fixture
def esp(pristine, tmp_path: Path) -> Path:
    return copy_tree(pristine(ESP), tmp_path / "esp-tflite-micro")


def zephyr_tree(upstream_src: Path, dest: Path) -> Path:
    """Zephyr's tflite-micro module as far as the installer sees it: the upstream sources and
    zephyr/module.yml with a CMakeLists.txt that lists sources by hand."""
    copy_tree(upstream_src, dest, UPSTREAM_PARTS)
    (dest / "zephyr").mkdir()
    (dest / "zephyr" / "module.yml").write_text("name: tflite-micro\nbuild:\n  cmake: zephyr\n")
    (dest / "zephyr" / "CMakeLists.txt").write_text(
        "zephyr_library()\nzephyr_library_sources(\n  ${TFLM_DIR}/tensorflow/lite/micro/kernels/transpose_conv.cc\n)\n"
    )
    return dest


def edge_impulse_tree(upstream_src: Path, dest: Path) -> Path:
    """edge-impulse-sdk/ as the installer sees it: includes prefixed edge-impulse-sdk/, and a
    transpose_conv.cc that holds an accelerator implementation (with its own kernel_util.h
    include and OpData) before the reference one, behind #if."""
    sdk = dest / "edge-impulse-sdk"
    copy_tree(upstream_src, sdk, ("tensorflow/lite", "tensorflow/compiler/mlir/lite"))
    (sdk / "classifier").mkdir()
    (sdk / "classifier" / "ei_run_classifier.h").write_text("// minimal\n")
    (sdk / "classifier" / "ei_classifier_config.h").write_text("// minimal: no accelerator\n")
    for p in (sdk / "tensorflow").rglob("*"):
        if p.suffix in (".h", ".cc") and p.is_file():
            t = p.read_text(encoding="utf-8", errors="replace")
            p.write_text(
                re.sub(r'#include "tensorflow/', '#include "edge-impulse-sdk/tensorflow/', t)
            )
    tc = sdk / TC
    accel = (
        '#include "../../../../classifier/ei_classifier_config.h"\n'
        "#if EI_CLASSIFIER_TFLITE_ENABLE_ACCEL == 1\n"
        '#include "edge-impulse-sdk/tensorflow/lite/micro/kernels/kernel_util.h"\n'
        "namespace tflite {\nstruct OpData {\n  int scratch_buffer_index;\n};\n"
        "TfLiteStatus Prepare(TfLiteContext* context, TfLiteNode* node) {\n"
        "  int bytes = GetTensorShape(output).FlatSize() * sizeof(float16_t);\n  return kTfLiteOk;\n}\n"
        "}  // namespace tflite\n#else\n"
    )
    tc.write_text(accel + tc.read_text() + "#endif\n")
    return dest


# ---------------------------------------------------------------- error paths (no snapshot needed)


def one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert msg and "\n" not in msg, msg
    return msg


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(TinySegError) as e:
        install(str(tmp_path / "missing"))
    assert "no such directory" in one_line(e)
    (tmp_path / "f").write_text("x")
    with pytest.raises(TinySegError) as e:
        install(str(tmp_path / "f"))
    assert "not a directory" in one_line(e)


def test_no_tflm_sources_names_what_was_looked_for(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("x\n")
    before = snapshot(tmp_path)
    with pytest.raises(TinySegError) as e:
        install(str(tmp_path))
    msg = one_line(e)
    assert (
        "no TFLM sources" in msg and "Arduino_TensorFlowLite" in msg and "edge-impulse-sdk" in msg
    )
    assert snapshot(tmp_path) == before


def test_tflm_sources_without_a_known_build(tmp_path: Path) -> None:
    (tmp_path / "tensorflow/lite/micro").mkdir(parents=True)
    with pytest.raises(TinySegError) as e:
        install(str(tmp_path))
    assert "without a build I know" in one_line(e)


def test_cli_refusal_is_one_line_exit_2(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tinyseg_plugin.cli",
            "tflm",
            "install",
            "--tflm-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "no TFLM sources" in r.stderr
    assert "Traceback" not in r.stderr


# ---------------------------------------------------------------- layouts


def test_layouts_are_recognised(pristine, tmp_path: Path) -> None:
    assert detect_tree_layout(pristine(UPSTREAM)).kind == "upstream-make"
    lay = detect_tree_layout(pristine(ARDUINO))
    assert (lay.kind, lay.ext, lay.src.name) == ("arduino", ".cpp", "src")
    lay = detect_tree_layout(
        pristine(ARDUINO) / "src"
    )  # the library's src/ named instead of the library
    assert (lay.kind, lay.root, lay.src.name) == ("arduino", pristine(ARDUINO), "src")
    assert detect_tree_layout(pristine(ESP)).kind == "esp-idf"
    assert detect_tree_layout(zephyr_tree(pristine(UPSTREAM), tmp_path / "z")).kind == "zephyr"
    ei = detect_tree_layout(edge_impulse_tree(pristine(UPSTREAM), tmp_path / "ei"))
    assert (ei.kind, ei.prefix, ei.src.name) == (
        "edge-impulse",
        "edge-impulse-sdk/",
        "edge-impulse-sdk",
    )


def _changed(before: dict[str, bytes], after: dict[str, bytes]) -> set[str]:
    return {k for k in before if k in after and before[k] != after[k]}


def test_upstream_install_check_idempotent(upstream: Path) -> None:
    before = snapshot(upstream)
    lines = list(install(str(upstream), check_only=True))
    assert lines[-1] == "check passed: nothing was changed" and snapshot(upstream) == before
    lines = list(install(str(upstream)))
    assert any(line.startswith("installed TinySeg") for line in lines)
    assert any(line.startswith("next: make -f") for line in lines)
    after = snapshot(upstream)
    assert _changed(before, after) == {
        TC,
        "tensorflow/lite/micro/kernels/cmsis_nn/transpose_conv.cc",
        "tensorflow/lite/micro/tools/make/Makefile",
        "tensorflow/lite/micro/kernels/Makefile.inc",
        "tensorflow/lite/micro/fake_micro_context.cc",
        "tensorflow/lite/micro/fake_micro_context.h",
    }
    assert (upstream / INSTALL_DIR / STAMP).is_file() and (
        upstream / INSTALL_DIR / "tests"
    ).is_dir()
    assert not [p for p in upstream.rglob(".tinyseg*")]
    again = list(install(str(upstream)))
    assert (
        any(line.startswith("already installed") for line in again) and snapshot(upstream) == after
    )


def test_upstream_before_sources_inc(upstream: Path) -> None:
    """TFLM before 2026-02 had no sources.inc: the fragment goes before the block that
    specialises MICROLITE_CC_KERNEL_SRCS, where the kernel list is complete."""
    mk = upstream / "tensorflow/lite/micro/tools/make/Makefile"
    text = mk.read_text()
    assert "include $(MAKEFILE_DIR)/sources.inc\n" in text
    mk.write_text(
        text.replace("include $(MAKEFILE_DIR)/sources.inc\n", "# (sources listed inline here)\n")
    )
    list(install(str(upstream)))
    out = mk.read_text().splitlines()
    at = out.index("include $(TENSORFLOW_ROOT)tensorflow/lite/micro/kernels/tinyseg/tinyseg.inc")
    spec = next(
        i
        for i, line in enumerate(out)
        if "specialize_files.py" in line and "MICROLITE_CC_KERNEL_SRCS" in line
    )
    assert at < spec and out[at + 2].startswith("if")


def test_edited_target_file_refuses_everything(upstream: Path) -> None:
    """One target file edited (another version, local changes): the refusal names the layout and
    every problem, and nothing in the tree changes (the other files would have applied)."""
    tc = upstream / TC
    tc.write_text(
        tc.read_text().replace('#include "tensorflow/lite/micro/kernels/kernel_util.h"\n', "")
    )
    mk = upstream / "tensorflow/lite/micro/micro_log.h"
    mk.unlink()
    before = snapshot(upstream)
    for check in (True, False):
        with pytest.raises(TinySegError) as e:
            install(str(upstream), check_only=check)
        msg = one_line(e)
        assert "upstream tflite-micro make tree" in msg and "Nothing was changed" in msg
        assert "kernel_util.h" in msg and "missing tensorflow/lite/micro/micro_log.h" in msg
        assert snapshot(upstream) == before


def test_partly_changed_file_is_refused(upstream: Path) -> None:
    tc = upstream / TC
    text = tc.read_text()
    i = text.index('#include "tensorflow/lite/micro/kernels/kernel_util.h"\n')
    tc.write_text(
        text[:i]
        + '#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv.h"\n'
        + text[i:]
    )
    before = snapshot(upstream)
    with pytest.raises(TinySegError) as e:
        install(str(upstream))
    assert "partly changed" in one_line(e) and snapshot(upstream) == before


def test_failure_while_writing_restores_the_tree(
    upstream: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(upstream)
    real = os.replace
    calls = {"n": 0}

    def flaky(src, dst):
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(tflm_install.os, "replace", flaky)
    with pytest.raises(TinySegError) as e:
        install(str(upstream))
    assert "restored" in one_line(e)
    monkeypatch.setattr(tflm_install.os, "replace", real)
    assert snapshot(upstream) == before


def test_arduino_library(arduino: Path) -> None:
    before = snapshot(arduino)
    lines = list(install(str(arduino)))
    assert any("Arduino_TensorFlowLite library" in line for line in lines)
    assert any("arduino-cli compile" in line and "--kernel-set arduino" in line for line in lines)
    after = snapshot(arduino)
    assert _changed(before, after) == {
        "src/" + TC.replace(".cc", ".cpp")
    }  # no CMSIS-NN TRANSPOSE_CONV there
    k = arduino / "src" / INSTALL_DIR
    assert (k / "tinyseg_spill.cpp").is_file() and not list(k.glob("*.cc"))
    assert (k / "tinyseg_stream_conv.cpp").is_file() and (k / "tinyseg_stream_internal.h").is_file()
    assert (k / "tinyseg_core_codec.cpp").is_file() and (
        arduino / "src/tinyseg/spill_manager.h"
    ).is_file()
    assert (arduino / "src/tinyseg_nicla/qspi_flash_block_device.cpp").is_file()
    assert not (k / "tests").exists() and not (k / "tinyseg.inc").exists()


def test_esp_idf_component(esp: Path) -> None:
    before = snapshot(esp)
    lines = list(install(str(esp)))
    assert any("idf.py build" in line for line in lines)
    assert _changed(before, snapshot(esp)) == {TC, "CMakeLists.txt"}
    cm = (esp / "CMakeLists.txt").read_text()
    assert (
        'file(GLOB srcs_tinyseg "${tfmicro_kernels_dir}/tinyseg/*.cc")' in cm
        and '"${srcs_tinyseg}"' in cm
    )


def test_zephyr_module(pristine, tmp_path: Path) -> None:
    z = zephyr_tree(pristine(UPSTREAM), tmp_path / "zephyr-tflm")
    before = snapshot(z)
    lines = list(install(str(z)))
    assert any("zephyr_library_sources" in line and "--kernel-set zephyr" in line for line in lines)
    # The module's hand-written CMake list is printed for the user, not edited.
    assert _changed(before, snapshot(z)) == {
        TC,
        "tensorflow/lite/micro/kernels/cmsis_nn/transpose_conv.cc",
    }


def test_edge_impulse_prefix_and_reference_branch(pristine, tmp_path: Path) -> None:
    ei = edge_impulse_tree(pristine(UPSTREAM), tmp_path / "project")
    list(install(str(ei)))
    sdk = ei / "edge-impulse-sdk"
    text = (sdk / TC).read_text()
    inc = (
        '#include "edge-impulse-sdk/tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv.h"'
    )
    assert text.count(inc) == 1
    # everything lands after #else, in the reference implementation
    assert (
        text.index("#else")
        < text.index(inc)
        < text.index("tinyseg_ops::TransposeConvMarker tinyseg_marker;")
    )
    assert text.count("tinyseg_ops::") == 4
    ops = (sdk / INSTALL_DIR / "tinyseg_common.h").read_text()
    assert '#include "edge-impulse-sdk/tinyseg/codec.h"' in ops
    compat = (sdk / INSTALL_DIR / "tinyseg_tflm_compat.h").read_text()
    assert '__has_include("edge-impulse-sdk/tensorflow/lite/micro/micro_common.h")' in compat
    assert (sdk / "tinyseg" / "codec.h").is_file()


# ---------------------------------------------------------------- compiling inside each tree


def _gxx() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not on PATH")
    return gxx


def compile_units(units: list[Path], flags: list[str], cwd: Path) -> None:
    """Compile each translation unit (-fsyntax-only: compile errors and warnings, no objects),
    with the schema precompiled by the same flags (tests/schema_pch.py)."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    gxx = _gxx()

    def one(cmd: list[str], u: Path) -> str:
        r = subprocess.run(
            [*cmd, "-fsyntax-only", str(u)],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=600,
        )
        return f"{u.name}:\n{r.stderr[-3000:]}" if r.returncode != 0 else ""

    with tempfile.TemporaryDirectory(dir=cwd.parent) as folder:
        cmd = [gxx, *flags, *schema_pch.include_args([gxx, *flags], Path(folder), cwd)]
        with ThreadPoolExecutor(max_workers=2) as pool:  # two cores at most
            failures = [f for f in pool.map(lambda u: one(cmd, u), units) if f]
    assert not failures, "\n".join(failures)


ESP_FLAGS = [
    "-std=gnu++14",
    "-Werror",
    "-DTF_LITE_STATIC_MEMORY",
    "-DTF_LITE_DISABLE_X86_NEON",
    "-DESP_NN",
    "-Wstrict-aliasing",
    "-Wno-unused-parameter",
    "-Wall",
    "-Wextra",
    "-Wvla",
    "-Wsign-compare",
    "-Wdouble-promotion",
    "-Wswitch",
    "-Wunused-function",
    "-Wmissing-field-initializers",
    "-Wshadow",
    "-Wunused-variable",
    "-fno-rtti",
    "-fno-exceptions",
    "-fno-threadsafe-statics",
    "-Wno-return-type",
    "-Wno-strict-aliasing",
    "-Wno-error=attributes",
    "-Wno-error=shadow",
    "-Wno-maybe-uninitialized",
    "-Wno-missing-field-initializers",
    "-Wno-error=sign-compare",
    "-Wno-error=double-promotion",
    "-Wno-type-limits",
    "-Wno-nonnull",
]


def test_kernels_compile_in_esp_idf_with_its_flags(esp: Path) -> None:
    """esp-tflite-micro's own C++ flags (CMakeLists.txt: -std=gnu++14 -Werror ...), host g++:
    every TinySeg source the component's GLOB picks up, and the patched transpose_conv.cc."""
    list(install(str(esp)))
    inc = [
        "-I.",
        "-Ithird_party/gemmlowp",
        "-Ithird_party/flatbuffers/include",
        "-Ithird_party/ruy",
        "-Ithird_party/kissfft",
    ]
    units = sorted((esp / INSTALL_DIR).glob("*.cc")) + [esp / TC]
    compile_units(units, ESP_FLAGS + inc, esp)


def test_kernels_compile_in_arduino_library(arduino: Path, pristine) -> None:
    """The Arduino library with only src/ on the include path (as arduino-cli compiles a
    library), the Nicla Vision core's -std=gnu++14, warnings as errors."""
    list(install(str(arduino)))
    src = arduino / "src"
    units = sorted((src / INSTALL_DIR).glob("*.cpp")) + [src / TC.replace(".cc", ".cpp")]
    flags = [
        "-x",
        "c++",
        "-std=gnu++14",
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
        "-Werror",
        "-DTF_LITE_STATIC_MEMORY",
        f"-I{src}",
    ]
    compile_units(units, flags, arduino)


def test_kernels_compile_in_upstream(upstream: Path, pristine) -> None:
    """Upstream's own make flags (C++17: upstream's headers need it since 2024)."""
    list(install(str(upstream)))
    dl = pristine(UPSTREAM) / "tensorflow/lite/micro/tools/make/downloads"
    if not (dl / "flatbuffers").is_dir():
        pytest.skip("the upstream snapshot has no flatbuffers download")
    inc = [
        f"-I{upstream}",
        f"-I{dl / 'flatbuffers/include'}",
        f"-I{dl / 'gemmlowp'}",
        f"-I{dl / 'ruy'}",
        f"-I{upstream / INSTALL_DIR / 'core/include'}",
    ]
    units = sorted((upstream / INSTALL_DIR).glob("*.cc")) + [upstream / TC]
    for std in ("-std=c++17",):
        compile_units(
            units,
            [
                std,
                "-Wall",
                "-Wextra",
                "-Wno-unused-parameter",
                "-Werror",
                "-DTF_LITE_STATIC_MEMORY",
                *inc,
            ],
            upstream,
        )


def test_kernels_compile_in_edge_impulse_tree(pristine, tmp_path: Path) -> None:
    """The minimal Edge Impulse tree: every include of ours carries edge-impulse-sdk/, the
    include root is the project (the directory holding edge-impulse-sdk/), C++17 as upstream's
    headers (which the tree is made of) need. Upstream's root is on the path for the few
    headers the minimal tree lacks (signal/, flatbuffers); include guards make the two copies of
    a header one."""
    up = pristine(UPSTREAM)
    dl = up / "tensorflow/lite/micro/tools/make/downloads"
    if not (dl / "flatbuffers").is_dir():
        pytest.skip("the upstream snapshot has no flatbuffers download")
    ei = edge_impulse_tree(up, tmp_path / "project")
    list(install(str(ei)))
    sdk = ei / "edge-impulse-sdk"
    units = sorted((sdk / INSTALL_DIR).glob("*.cc")) + [sdk / TC]
    compile_units(
        units,
        [
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Wno-unused-parameter",
            "-Werror",
            "-DTF_LITE_STATIC_MEMORY",
            f"-I{ei}",
            f"-I{up}",
            f"-I{dl / 'flatbuffers/include'}",
            f"-I{dl / 'gemmlowp'}",
            f"-I{dl / 'ruy'}",
        ],
        ei,
    )


def _make_sources(tree: Path, *args: str) -> list[str]:
    """What TFLM's make build compiles into microlite (its list_library_sources target)."""
    if shutil.which("make") is None:
        pytest.skip("make not on PATH")
    env = dict(
        os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    )
    r = subprocess.run(
        ["make", "-f", "tensorflow/lite/micro/tools/make/Makefile", *args, "list_library_sources"],
        cwd=tree,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split()


@pytest.mark.parametrize("sources_inc", ["included", "inline"])
def test_make_build_compiles_our_sources(pristine, tmp_path: Path, sources_inc: str) -> None:
    """In TFLM's make build (reference and CMSIS-NN kernels) microlite gets every TinySeg
    source; "inline" is the tree as it was before 2026-02, with sources.inc's lists written
    in the Makefile itself."""
    up = pristine(UPSTREAM)
    tree = copy_tree(up, tmp_path / "tflm")
    mk = tree / "tensorflow/lite/micro/tools/make/Makefile"
    if sources_inc == "inline":
        inc = (tree / "tensorflow/lite/micro/tools/make/sources.inc").read_text()
        mk.write_text(mk.read_text().replace("include $(MAKEFILE_DIR)/sources.inc\n", inc))
    list(install(str(tree)))
    ours = sorted(
        p.relative_to(tree).as_posix()
        for p in (tree / INSTALL_DIR).rglob("*.cc")
        if "tests" not in p.parts
    )
    for args in ((), ("OPTIMIZED_KERNEL_DIR=cmsis_nn",)):
        if args and not (up / "tensorflow/lite/micro/tools/make/downloads/cmsis_nn").is_dir():
            continue
        listed = _make_sources(tree, *args)
        assert set(ours) <= set(listed), sorted(set(ours) - set(listed))
