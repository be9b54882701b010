"""Compile check of the Nicla Vision board code and sketches against a real Arduino Mbed core.

The CMake build (tflm_ops, targets tinyseg_nicla_syntax_CM7/CM4) compiles the board code
against declaration-only stubs, which runs anywhere but cannot tell whether the stubs match
the real API. This module compiles the same code the way arduino-cli does for the Nicla
Vision (board `arduino:mbed_nicla:nicla_vision`, flash split 1MB M7 + 1MB M4), with the
variant's own flag files and the core's real headers:

* every .cc of tflm_ops/targets/nicla_vision and tflm_ops/core/src, for the M7 (variant
  NICLA_VISION) and the M4 (variant GENERIC_STM32H747_M4);
* the TinySeg TFLM kernels and the TRANSPOSE_CONV the installer changed, for both cores;
* the M4 sketch (examples/nicla_vision/tinyseg_erase_m4) for each storage, and the M7
  sketch (examples/nicla_vision/tinyseg_unet_m7) for each storage and erase mode.

All of it from what a user installs: the Arduino_TensorFlowLite library (the snapshot
tflite-micro-arduino-examples-7948b85 in ../shared/third_party, TFLM of 2023-02, unpacked
into a tmp dir) with `tinyseg tflm install` run on it; the library's src/ is the only
include root besides the core's, as arduino-cli compiles a library, and C++ is the core's
own -std=gnu++14. A sketch is compiled as arduino-cli does (`#include <Arduino.h>` and a
#line directive put before it). A compile fails the test with the compiler's messages, and
so does any warning located in one of our files (-Wall -Wextra; the core's and TFLM's own
warnings are not ours and are ignored). Compile only: objects are discarded, nothing is
linked (a core checkout has no libmbed.a) and nothing runs.

Environment:
  ARDUINO_MBED_CORE_DIR  the core: an installed `arduino:mbed_nicla` platform, or a
                         checkout of ArduinoCore-mbed with ArduinoCore-API's api/ folder
                         at cores/arduino/api (see tflm_ops/targets/nicla_vision/README.md).
                         Unset: every test here is skipped. Only read, never written.
  (the Arduino library)  ../shared/third_party/tflite-micro-arduino-examples-7948b85.tar.xz
                         via unpack.sh. Absent: every test here is skipped.
  NICLA_CXX              the compiler (default arm-none-eabi-g++ from PATH).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import schema_pch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "nicla_vision"
sys.path.insert(0, str(EXAMPLES))
import make_model_header  # noqa: E402

from tinyseg_plugin.deploy.tflm_install import INSTALL_DIR, install  # noqa: E402

CORE_ENV = "ARDUINO_MBED_CORE_DIR"
THIRD_PARTY = ROOT.parent / "shared" / "third_party"
ARDUINO_LIBRARY = "tflite-micro-arduino-examples-7948b85"
CXX_ENV = "NICLA_CXX"

BOARD = "nicla_vision"
SPLIT = "50_50"  # "1MB M7 + 1MB M4": the split the sketches need
ARCH = "MBED_NICLA"  # {build.arch} of the arduino:mbed_nicla platform
ARDUINO_VERSION = "10607"
# What examples/nicla_vision/README.md tells users to set as compiler.cpp.extra_flags:
# <chrono> before the core's Arduino.h defines its one-argument abs() macro (which breaks
# std::chrono::abs, even in the core's own files). The C++ standard stays the core's gnu++14.
CPP_EXTRA_FLAGS = ("-include", "chrono")
WARNING_FLAGS = ("-Wall", "-Wextra")  # platform.txt: compiler.warning_flags.all
# Libraries of the core that RPC.h pulls in (arduino-cli finds them by their headers).
SKETCH_LIBRARIES = ("RPC", "rpclib", "openamp_arduino")
STORAGES = {"internal": 1, "qspi": 2, "remote": 3}
TIMEOUT_S = 600

TARGET_SOURCES = sorted((ROOT / "tflm_ops" / "targets" / "nicla_vision").glob("*.cc"))
CORE_SOURCES = sorted((ROOT / "tflm_ops" / "core" / "src").glob("*.cc"))
KERNEL_SOURCES = sorted((ROOT / "tflm_ops" / "kernels").glob("*.cc"))
# Where `tinyseg tflm install` puts our files under the library's src/.
OUR_LIBRARY_DIRS = ("tinyseg", "tinyseg_nicla", INSTALL_DIR)

DIAGNOSTIC = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? (?P<kind>warning|error): ", re.MULTILINE
)


# ---------------------------------------------------------------- the core's build rules


def read_properties(path: Path) -> dict[str, str]:
    """key=value lines of an Arduino boards.txt / platform.txt."""
    props: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


@dataclass(frozen=True)
class CoreTarget:
    """One core of the board (`target_core` menu entry) as boards.txt defines it."""

    name: str  # cm7 | cm4
    variant: str  # build.variant
    mcu: str
    fpu: str
    float_abi: str
    arch_define: str  # compiler.mbed.arch.define
    defines: Path  # compiler.mbed.defines file
    cxxflags: Path  # compiler.mbed.cxxflags file
    includes: Path  # compiler.mbed.includes file (-iwithprefixbefore lines)
    split_flags: tuple[str, ...]  # build.extra_ldflags of the flash split (also on compiles)


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    core_dir: Path
    targets: dict[str, CoreTarget]

    @property
    def core_path(self) -> Path:  # {build.core.path}
        return self.core_dir / "cores" / "arduino"

    def command(
        self, target: CoreTarget, source: Path, obj: Path, include_dirs: list[Path]
    ) -> list[str]:
        """platform.txt's recipe.cpp.o.pattern, expanded for one source file."""
        variant_dir = self.core_dir / "variants" / target.variant
        includes = [f"-I{self.core_path}", f"-I{variant_dir}"] + [f"-I{d}" for d in include_dirs]
        return [
            self.cxx,
            "-c",
            *WARNING_FLAGS,
            "-g3",
            "-nostdlib",
            f"@{target.defines}",
            f"@{target.cxxflags}",
            *target.arch_define.split(),
            f"-mcpu={target.mcu}",
            target.float_abi,
            target.fpu,
            f"-DARDUINO={ARDUINO_VERSION}",
            f"-DARDUINO_{target.variant}",
            f"-DARDUINO_ARCH_{ARCH}",
            "-DARDUINO_ARCH_MBED",
            "-DARDUINO_LIBRARY_DISCOVERY_PHASE=0",
            *includes,
            *target.split_flags,
            *CPP_EXTRA_FLAGS,
            f"-I{self.core_path / 'api' / 'deprecated'}",
            f"-I{self.core_path / 'api' / 'deprecated-avr-comp'}",
            f"-iprefix{self.core_path}",
            f"@{target.includes}",
            str(source),
            "-o",
            str(obj),
        ]


class LayoutError(Exception):
    """ARDUINO_MBED_CORE_DIR is set but does not look like the core."""


def board_property(props: dict[str, str], core: str, key: str) -> str:
    """A nicla_vision property, the target_core menu's value first."""
    for k in (f"{BOARD}.menu.target_core.{core}.{key}", f"{BOARD}.{key}"):
        if k in props:
            return props[k]
    raise LayoutError(f"boards.txt has no {BOARD}.{key} (nor for target_core={core})")


def variant_file(core_dir: Path, variant: str, pattern: str) -> Path:
    value = pattern.replace("{build.variant.path}", str(core_dir / "variants" / variant))
    if "{" in value:
        raise LayoutError(f"boards.txt: cannot resolve {pattern!r}")
    path = Path(value).resolve()
    if not path.is_file():
        raise LayoutError(f"{path} not found")
    return path


def load_toolchain(core_dir: Path, cxx: str) -> Toolchain:
    """The M7 and M4 compile settings of the Nicla Vision, read from the core's own files."""
    for rel, hint in (
        ("boards.txt", ""),
        ("platform.txt", ""),
        ("cores/arduino/Arduino.h", ""),
        (
            "cores/arduino/api/ArduinoAPI.h",
            ": copy the api/ folder of ArduinoCore-API to cores/arduino/api",
        ),
    ):
        if not (core_dir / rel).is_file():
            raise LayoutError(f"{core_dir / rel} not found{hint}")
    platform = read_properties(core_dir / "platform.txt")
    rule = platform.get("compiler.cpp.flags", "") + " " + platform.get("recipe.cpp.o.pattern", "")
    for piece in (
        "@{compiler.mbed.defines}",
        "@{compiler.mbed.cxxflags}",
        "-iprefix{build.core.path}",
        "@{compiler.mbed.includes}",
    ):
        if piece not in rule:
            raise LayoutError(
                f"platform.txt's C++ recipe has no {piece}: the core's build rules "
                "changed, update tests/test_nicla_build.py"
            )
    props = read_properties(core_dir / "boards.txt")
    split = props.get(f"{BOARD}.menu.split.{SPLIT}.build.extra_ldflags")
    if split is None:
        raise LayoutError(f"boards.txt has no {BOARD} flash split {SPLIT}")
    targets = {}
    for core in ("cm7", "cm4"):
        variant = board_property(props, core, "build.variant")
        if not (core_dir / "variants" / variant).is_dir():
            raise LayoutError(f"variant {core_dir / 'variants' / variant} not found")
        targets[core] = CoreTarget(
            name=core,
            variant=variant,
            mcu=board_property(props, core, "build.mcu"),
            fpu=board_property(props, core, "build.fpu"),
            float_abi=board_property(props, core, "build.float-abi"),
            arch_define=props.get(f"{BOARD}.menu.target_core.{core}.compiler.mbed.arch.define", ""),
            defines=variant_file(
                core_dir, variant, board_property(props, core, "compiler.mbed.defines")
            ),
            cxxflags=variant_file(
                core_dir, variant, board_property(props, core, "compiler.mbed.cxxflags")
            ),
            includes=variant_file(
                core_dir, variant, board_property(props, core, "compiler.mbed.includes")
            ),
            split_flags=tuple(split.split()),
        )
    return Toolchain(cxx=cxx, core_dir=core_dir, targets=targets)


# ---------------------------------------------------------------- compiling


@dataclass(frozen=True)
class Compile:
    command: list[str]
    returncode: int
    output: str

    def diagnostics(self, kind: str, ours: OurFiles) -> list[str]:
        """`kind` (warning|error) lines located in one of our files."""
        return [
            m.group(0) + self.output[m.end() :].split("\n", 1)[0]
            for m in DIAGNOSTIC.finditer(self.output)
            if m.group("kind") == kind and ours.contains(m.group("file"))
        ]


@dataclass(frozen=True)
class OurFiles:
    """This project's files: in the repository, or staged copies of them."""

    roots: tuple[Path, ...]

    def contains(self, name: str) -> bool:
        p = Path(name).resolve()
        return any(p == r or r in p.parents for r in self.roots)

    def with_root(self, root: Path) -> OurFiles:
        return OurFiles(self.roots + (root.resolve(),))


def run_compile(
    tc: Toolchain,
    target: CoreTarget,
    source: Path,
    include_dirs: list[Path],
    workdir: Path,
    defines: tuple[str, ...] = (),
    pch: Path | None = None,
) -> Compile:
    """``pch``: a folder for the schema precompiled with this command's flags (tests/schema_pch.py;
    worth it where many sources share the flags: the kernel sources of one core)."""
    obj = workdir / (source.name + f".{target.name}.o")
    cmd = tc.command(target, source, obj, include_dirs)
    cmd[1:1] = list(defines)
    if pch is not None:  # before the core's `-include chrono`: GCC takes a header only first
        cmd[1:1] = schema_pch.include_args(cmd[:-3], pch, workdir, first=("chrono",))
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=TIMEOUT_S)
    obj.unlink(missing_ok=True)  # compile only
    return Compile(cmd, proc.returncode, proc.stdout + proc.stderr)


def assert_clean(result: Compile, ours: OurFiles, what: str) -> None:
    """Compiled, and no warning located in our files; the compiler's text otherwise."""
    text = result.output if len(result.output) < 12000 else result.output[:12000] + "\n[...]"
    if result.returncode != 0:
        pytest.fail(
            f"{what} does not compile (exit {result.returncode}):\n{text}\n"
            f"command: {' '.join(result.command)}",
            pytrace=False,
        )
    warnings = result.diagnostics("warning", ours)
    if warnings:
        raise AssertionError(
            f"{what}: warnings in our files:\n" + "\n".join(warnings) + f"\n\nfull output:\n{text}"
        )


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def toolchain() -> Toolchain:
    value = os.environ.get(CORE_ENV)
    if not value:
        pytest.skip(
            f"{CORE_ENV} not set: no Arduino Mbed core to compile against "
            "(see tflm_ops/targets/nicla_vision/README.md)"
        )
    cxx = os.environ.get(CXX_ENV, "arm-none-eabi-g++")
    if shutil.which(cxx) is None:
        pytest.skip(f"{cxx} not found (apt: gcc-arm-none-eabi libstdc++-arm-none-eabi-newlib)")
    try:
        return load_toolchain(Path(value).expanduser().resolve(), cxx)
    except LayoutError as exc:
        problem = str(exc)
    pytest.fail(f"{CORE_ENV}={value}: {problem}", pytrace=False)


@pytest.fixture(scope="session")
def kernel_pch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the kernel sources' precompiled schema, one per core."""
    return tmp_path_factory.mktemp("schema-pch")


@pytest.fixture(scope="session")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Arduino_TensorFlowLite library with TinySeg installed by `tinyseg tflm install`;
    returns its src/ (the include root)."""
    unpack = THIRD_PARTY / "unpack.sh"
    if not unpack.is_file():
        pytest.skip(f"{unpack} not present: no Arduino_TensorFlowLite library to install into")
    base = tmp_path_factory.mktemp("third_party")
    r = subprocess.run(
        ["bash", str(unpack), ARDUINO_LIBRARY, str(base)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if r.returncode != 0:
        pytest.skip(f"unpack.sh {ARDUINO_LIBRARY}: {r.stderr.strip()}")
    lib = base / "Arduino_TensorFlowLite"
    lib.mkdir()
    shutil.copy2(Path(r.stdout.strip()) / "library.properties", lib)
    shutil.copytree(Path(r.stdout.strip()) / "src", lib / "src", symlinks=True)
    lines = list(install(str(lib)))
    assert any(line.startswith("installed TinySeg") for line in lines), lines
    return lib / "src"


@pytest.fixture(scope="session")
def ours(library: Path) -> OurFiles:
    return OurFiles((ROOT.resolve(),) + tuple((library / d).resolve() for d in OUR_LIBRARY_DIRS))


def staged(library: Path, source: Path) -> Path:
    """Where the installer put one of our sources in the library (.cc become .cpp)."""
    kind = source.parent.name
    name = source.stem + ".cpp"
    d = {
        "nicla_vision": library / "tinyseg_nicla" / name,
        "src": library / INSTALL_DIR / f"tinyseg_core_{name}",
        "kernels": library / INSTALL_DIR / name,
    }[kind]
    assert d.is_file(), f"{source} is not installed at {d}"
    return d


def prepare_sketch(sketch_dir: Path, build: Path) -> Path:
    """arduino-cli's sketch preprocessing, minus prototype generation (our sketches define
    every function before use): the sketch's headers beside <name>.ino.cpp, which is the
    .ino after `#include <Arduino.h>` and a #line directive pointing back at the .ino."""
    build.mkdir(parents=True, exist_ok=True)
    for h in sketch_dir.glob("*.h"):
        shutil.copy2(h, build / h.name)
    ino = sketch_dir / f"{sketch_dir.name}.ino"
    cpp = build / f"{ino.name}.cpp"
    cpp.write_text(f'#include <Arduino.h>\n#line 1 "{ino}"\n' + ino.read_text())
    return cpp


def sketch_library_dirs(tc: Toolchain) -> list[Path]:
    dirs = [tc.core_dir / "libraries" / name / "src" for name in SKETCH_LIBRARIES]
    for d in dirs:
        if not d.is_dir():
            pytest.fail(
                f"{d} not found: the core's {d.parent.name} library is needed by RPC.h",
                pytrace=False,
            )
    return dirs


# ---------------------------------------------------------------- sanity: the check can fail

BROKEN = """#include "tinyseg_nicla/internal_flash_block_device.h"
int Broken(mbed::FlashIAP& f, const void* p) { return f.program(p, 0x08180000u); }  // no size
"""
FIXED = BROKEN.replace("0x08180000u)", "0x08180000u, 32u)").replace("  // no size", "")
WARNS = """#include "tinyseg_nicla/qspi_flash_block_device.h"
int Warns(int x) { int unused = x; return 0; }
"""


@pytest.mark.parametrize("core", ["cm7", "cm4"])
def test_sanity_api_mismatch_fails(
    toolchain: Toolchain, library: Path, ours: OurFiles, tmp_path: Path, core: str
) -> None:
    """A wrong FlashIAP call is rejected by the real header, the right one compiles."""
    target = toolchain.targets[core]
    src = tmp_path / "broken.cc"
    src.write_text(BROKEN)
    bad = run_compile(toolchain, target, src, [library], tmp_path)
    assert bad.returncode != 0, "a FlashIAP::program call without its size compiled"
    assert "program" in bad.output and "error" in bad.output, bad.output[:4000]
    src.write_text(FIXED)
    assert_clean(run_compile(toolchain, target, src, [library], tmp_path), ours, "fixed snippet")


def test_sanity_warning_in_our_file_fails(
    toolchain: Toolchain, library: Path, tmp_path: Path
) -> None:
    """A -Wall warning in one of our files fails the check (here: the snippet is ours)."""
    src = tmp_path / "warns.cc"
    src.write_text(WARNS)
    result = run_compile(toolchain, toolchain.targets["cm7"], src, [library], tmp_path)
    assert result.returncode == 0, result.output[:4000]
    with pytest.raises(AssertionError, match="unused"):
        assert_clean(result, OurFiles((tmp_path.resolve(),)), "warning snippet")


# ---------------------------------------------------------------- our files


@pytest.mark.parametrize("core", ["cm7", "cm4"])
@pytest.mark.parametrize("source", TARGET_SOURCES + CORE_SOURCES, ids=lambda p: p.name)
def test_board_and_core_sources(
    toolchain: Toolchain, library: Path, ours: OurFiles, tmp_path: Path, source: Path, core: str
) -> None:
    """Each file as arduino-cli compiles it from the installed library."""
    result = run_compile(
        toolchain, toolchain.targets[core], staged(library, source), [library], tmp_path
    )
    assert_clean(result, ours, f"{source.relative_to(ROOT)} ({core})")


@pytest.mark.parametrize("core", ["cm7", "cm4"])
@pytest.mark.parametrize("source", KERNEL_SOURCES, ids=lambda p: p.name)
def test_kernel_sources(
    toolchain: Toolchain,
    library: Path,
    ours: OurFiles,
    tmp_path: Path,
    source: Path,
    core: str,
    kernel_pch: Path,
) -> None:
    """The TFLM kernels: arduino-cli builds the whole library for either core's sketch."""
    result = run_compile(
        toolchain,
        toolchain.targets[core],
        staged(library, source),
        [library],
        tmp_path,
        pch=kernel_pch,
    )
    assert_clean(result, ours, f"{source.relative_to(ROOT)} ({core})")


@pytest.mark.parametrize("core", ["cm7", "cm4"])
def test_changed_transpose_conv(
    toolchain: Toolchain, library: Path, ours: OurFiles, tmp_path: Path, core: str
) -> None:
    """The library's own TRANSPOSE_CONV as the installer changed it (the Nicla runs this one:
    the library has no CMSIS-NN TRANSPOSE_CONV)."""
    tc = library / "tensorflow/lite/micro/kernels/transpose_conv.cpp"
    assert "tinyseg_ops::ReadTransposeConvMarker" in tc.read_text()
    assert not (library / "tensorflow/lite/micro/kernels/cmsis_nn/transpose_conv.cpp").exists()
    result = run_compile(toolchain, toolchain.targets[core], tc, [library], tmp_path)
    assert_clean(result, ours, f"transpose_conv.cpp ({core})")


@pytest.mark.parametrize("storage", list(STORAGES))
def test_sketch_m4(
    toolchain: Toolchain, library: Path, ours: OurFiles, tmp_path: Path, storage: str
) -> None:
    cpp = prepare_sketch(EXAMPLES / "tinyseg_erase_m4", tmp_path / "sketch")
    result = run_compile(
        toolchain,
        toolchain.targets["cm4"],
        cpp,
        [library] + sketch_library_dirs(toolchain),
        tmp_path,
        (f"-DTINYSEG_STORAGE={STORAGES[storage]}",),
    )
    assert_clean(result, ours.with_root(tmp_path), f"tinyseg_erase_m4 ({storage})")


M7_CONFIGS = [("internal", 1), ("internal", 0), ("qspi", 1), ("qspi", 0), ("remote", 0)]
# TINYSEG_CAMERA=1 (camera_row_source.h: the frame from the DCMI line ring, the mask to Serial)
# with one storage of each erase mode; the others keep the generated frame.
M7_CAMERA = [("internal", 1, 1), ("qspi", 0, 1)]
M7_CASES = [(s, a, 0) for s, a in M7_CONFIGS] + M7_CAMERA


@pytest.mark.parametrize(
    "storage,async_erase,camera",
    M7_CASES,
    ids=[f"{s}-async{a}" + ("-camera" if c else "") for s, a, c in M7_CASES],
)
def test_sketch_m7(
    toolchain: Toolchain,
    library: Path,
    ours: OurFiles,
    tmp_path: Path,
    storage: str,
    async_erase: int,
    camera: int,
) -> None:
    build = tmp_path / "sketch"
    cpp = prepare_sketch(EXAMPLES / "tinyseg_unet_m7", build)
    # model_data.h is generated per model (make_model_header.py): a placeholder flatbuffer
    # through the same generator gives the symbols the sketch uses.
    placeholder = bytes(4) + b"TFL3" + bytes(8)
    (build / "model_data.h").write_text(
        make_model_header.header_text(
            placeholder, "g_tinyseg_model", "placeholder.tflite", 160 * 1024
        )
    )
    result = run_compile(
        toolchain,
        toolchain.targets["cm7"],
        cpp,
        [library] + sketch_library_dirs(toolchain),
        tmp_path,
        (
            f"-DTINYSEG_STORAGE={STORAGES[storage]}",
            f"-DTINYSEG_ASYNC_ERASE={async_erase}",
            f"-DTINYSEG_CAMERA={camera}",
        ),
    )
    assert_clean(
        result,
        ours.with_root(tmp_path),
        f"tinyseg_unet_m7 ({storage}, async erase {async_erase}, camera {camera})",
    )


# ---------------------------------------------------------------- generated storage regions

REGIONS_HEADER = "tinyseg_storage_regions.h"
REGIONS_USER = f"""#include <Arduino.h>
#include "{REGIONS_HEADER}"
bool SetUpRegions(tinyseg::Runtime& runtime) {{
  if (!tinyseg_regions::Attach(runtime)) return false;
  tinyseg_regions::EndInference();
  return runtime.storage(1) != nullptr && runtime.storage(3) != nullptr;
}}
"""


def test_linker_script_holds_what_the_storage_header_assumes(toolchain: Toolchain) -> None:
    """tinyseg_plugin/deploy/storage_header.py places RAM regions by the M7 linker script: a NOLOAD
    .uninitialized section in RAM (AXI SRAM), no section in DTCMRAM, nothing in RAM_D2 below
    .lwip_sec at 0x30040000, and a RAM vector table of the size it skips."""
    from tinyseg_plugin.deploy import storage_header as sh

    script = (toolchain.core_dir / "variants" / "NICLA_VISION" / "linker_script.ld").read_text()
    assert re.search(
        r"\.uninitialized \(NOLOAD\):\s*\{[^}]*\*\(\.uninitialized\)[^}]*\} > RAM\b", script
    )
    assert "> DTCMRAM" not in script and ">DTCMRAM" not in script
    assert "ORIGIN = 0x20000000 + (((166 * 4) + 7) & 0xFFFFFFF8)" in script
    assert sh.VECTOR_TABLE == ((166 * 4) + 7) & 0xFFFFFFF8
    d2 = [int(a, 16) for a in re.findall(r"ABSOLUTE\((0x3[0-9A-Fa-f]+)\)", script)]
    from tinyseg_plugin.memory.boards import load_board

    assert d2 and min(d2) == 0x30040000 == sh.places_of(load_board("nicla-vision"))["sram2"].end


def test_generated_storage_regions_compile(
    toolchain: Toolchain, library: Path, ours: OurFiles, tmp_path: Path
) -> None:
    """The header storage_header writes for a plan with RAM regions in DTCM, AXI SRAM and D2 SRAM1
    (and the QSPI flash as region 0), used as a sketch would, compiles for the M7."""
    from tinyseg_plugin.deploy.storage_header import places_of, storage_header
    from tinyseg_plugin.memory.boards import load_board

    plan = [(0, "qspi", 1 << 20), (1, "dtcm", 64 * 1024), (2, "axi-sram", 128 * 1024)]
    plan += [(3, "sram1", 64 * 1024), (4, "dtcm", 32 * 1024)]
    (tmp_path / REGIONS_HEADER).write_text(
        storage_header(plan, places_of(load_board("nicla-vision")), m4_idle=True)
    )
    source = tmp_path / "use_regions.cpp"
    source.write_text(REGIONS_USER)
    result = run_compile(toolchain, toolchain.targets["cm7"], source, [library, tmp_path], tmp_path)
    assert_clean(result, ours.with_root(tmp_path), "the generated storage regions header")


def test_sketch_m7_with_the_plans_storage_regions(
    toolchain: Toolchain, library: Path, ours: OurFiles, tmp_path: Path
) -> None:
    """The M7 sketch with the header `optimize --storage-header tinyseg_storage.h` writes beside it
    (the Tiny U-Net at 64 KB keeps its two row-spill slots in the DTCM) compiles, attaching the
    region before AllocateTensors."""
    from tinyseg_plugin.deploy.storage_header import places_of, slot_region_bytes, storage_header
    from tinyseg_plugin.memory.boards import load_board

    build = tmp_path / "sketch"
    cpp = prepare_sketch(EXAMPLES / "tinyseg_unet_m7", build)
    placeholder = bytes(4) + b"TFL3" + bytes(8)
    (build / "model_data.h").write_text(
        make_model_header.header_text(
            placeholder, "g_tinyseg_model", "placeholder.tflite", 64 * 1024
        )
    )
    dtcm = slot_region_bytes(76_800) + slot_region_bytes(38_400)
    (build / "tinyseg_storage.h").write_text(
        storage_header([(1, "dtcm", dtcm)], places_of(load_board("nicla-vision")), slots=2)
    )
    result = run_compile(
        toolchain,
        toolchain.targets["cm7"],
        cpp,
        [library] + sketch_library_dirs(toolchain),
        tmp_path,
        (
            f"-DTINYSEG_STORAGE={STORAGES['qspi']}",
            "-DTINYSEG_ASYNC_ERASE=0",
            "-DTINYSEG_STORAGE_REGIONS_REQUIRED",  # an #error if the header were not found
        ),
    )
    assert_clean(result, ours.with_root(tmp_path), "tinyseg_unet_m7 with storage regions")
