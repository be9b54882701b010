"""``tinyseg tflm package``: TinySeg's kernels and runtime as a library in an ecosystem's own form.

``tinyseg tflm install`` edits a TFLM tree, and the Arduino library manager or the ESP-IDF
component manager overwrites such edits on the next update. A package instead stands beside
the ecosystem's TFLM package, depends on it, and registers its kernels through the op resolver
(tflm_ops/package/TinySeg.h): the four custom operators, and TRANSPOSE_CONV's narrowed scratch
as a registration of its own (tflm_ops/package/tinyseg_transpose_conv_op.cc), so no TFLM file
changes.

==========  ==============================================  ==============================
format      what is written                                 depends on
==========  ==============================================  ==============================
arduino     library.properties, src/, examples/ (the Nicla  Arduino_TensorFlowLite
            Vision sketches), extras/make_model_header.py
esp-idf     idf_component.yml, CMakeLists.txt, src/         espressif/esp-tflite-micro
zephyr      zephyr/module.yml, CMakeLists.txt, Kconfig,     the tflite-micro Zephyr module
            src/
platformio  library.json, src/                              tflite-micro (Arduino's form)
==========  ==============================================  ==============================

In every form the sources sit under src/: TinySeg.h at its top, the runtime core's headers in
src/tinyseg/, the kernels in src/tinyseg/kernels/, the core's sources in src/tinyseg/core/ and,
for Arduino, the Nicla Vision storage back-ends in src/tinyseg_nicla/. The kernels' includes of
"tensorflow/lite/micro/kernels/tinyseg/..." (their place in an installed tree) become
"tinyseg/kernels/...", so nothing in a package lies in or shadows TFLM's own tensorflow/ tree.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..errors import TinySegError
from .tflm_install import INSTALL_DIR, Sources, find_sources

FORMATS = ("arduino", "esp-idf", "zephyr", "platformio")
NAME = "TinySeg"
PACKAGE_INCLUDE = "tinyseg/kernels"  # where the kernels' headers are reached from src/
_KERNEL_INCLUDE = re.compile(r'(#\s*include\s+")' + re.escape(INSTALL_DIR) + "/")

# The M7 sketch as it is written for a tree with TinySeg installed, and what the packaged copy
# says instead: TinySeg.h, and TRANSPOSE_CONV from tinyseg::AddOps through tinyseg::OpResolver.
# Each text must occur once in the sketch: a sketch that changed fails here, not on a board.
M7_SKETCH_CHANGES = (
    (
        '#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"\n'
        '#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"\n',
        "#include <TinySeg.h>\n",
    ),
    (
        "// library with TinySeg installed into it (examples/nicla_vision/README.md),\n",
        "// library and the TinySeg library (`tinyseg tflm package --format arduino`),\n",
    ),
    (
        "constexpr int kOps = 5 + tflite::kTinySegOpCount;",
        "constexpr int kOps = 4 + tinyseg::kOpCount;",
    ),
    (
        "tflite::MicroMutableOpResolver<kOps> resolver;\n",
        "tflite::MicroMutableOpResolver<kOps> resolver;\n"
        "tinyseg::OpResolver<kOps> tinyseg_resolver(resolver);  // TRANSPOSE_CONV: TinySeg's\n",
    ),
    ("  resolver.AddTransposeConv();\n", ""),
    ("tflite::AddTinySegOps(resolver)", "tinyseg::AddOps(resolver)"),
    (
        "tflite::MicroInterpreter(model, resolver,",
        "tflite::MicroInterpreter(model, tinyseg_resolver,",
    ),
)
M4_SKETCH_INCLUDE = "#include <TinySegNicla.h>  // the TinySeg library's Nicla Vision back-ends\n"
NICLA_HEADER = """// The Nicla Vision storage back-ends of the TinySeg library, for a sketch that
// needs no TFLM (the M4's erase worker, examples/tinyseg_erase_m4).
#ifndef TINYSEG_TINYSEGNICLA_H_
#define TINYSEG_TINYSEGNICLA_H_
{includes}
#endif  // TINYSEG_TINYSEGNICLA_H_
"""


@dataclass(frozen=True)
class PackageFile:
    """One file of a package: its path inside the package and its text."""

    path: str
    text: str


def package_version() -> str:
    try:
        return metadata.version("tinyseg-plugin")
    except metadata.PackageNotFoundError:
        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
        m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
        return m.group(1) if m else "0.0.0"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def rewrite_includes(text: str) -> str:
    """The kernels' includes of their installed place, as the package reaches them."""
    return _KERNEL_INCLUDE.sub(r"\g<1>" + PACKAGE_INCLUDE + "/", text)


def _renamed(path: Path, ext: str) -> str:
    return path.stem + ext if path.suffix == ".cc" else path.name


def library_sources(s: Sources, ext: str, nicla: bool) -> list[PackageFile]:
    """src/ of every form; ``ext`` is the extension the ecosystem compiles (.cpp for Arduino)."""
    package_dir = s.tflm_ops / "package"
    out = [PackageFile(f"src/{NAME}.h", rewrite_includes(_read(package_dir / f"{NAME}.h")))]
    kernels = s.kernel_files() + sorted(package_dir.glob("tinyseg_*"))
    out += [
        PackageFile(f"src/{PACKAGE_INCLUDE}/{_renamed(p, ext)}", rewrite_includes(_read(p)))
        for p in kernels
    ]
    out += [PackageFile(f"src/tinyseg/{p.name}", _read(p)) for p in s.core_headers()]
    out += [PackageFile(f"src/tinyseg/core/{_renamed(p, ext)}", _read(p)) for p in s.core_sources()]
    if nicla:
        nicla_files = s.nicla_files()
        out += [PackageFile(f"src/tinyseg_nicla/{_renamed(p, ext)}", _read(p)) for p in nicla_files]
        includes = "".join(
            f'#include "tinyseg_nicla/{p.name}"\n' for p in nicla_files if p.suffix == ".h"
        )
        out.append(PackageFile("src/TinySegNicla.h", NICLA_HEADER.format(includes=includes)))
    return out


def _sources_list(files: list[PackageFile], ext: str) -> list[str]:
    return sorted(f.path for f in files if f.path.endswith(ext))


def packaged_m7_sketch(text: str) -> str:
    """The M7 sketch with M7_SKETCH_CHANGES applied; one sentence when one does not fit."""
    for old, new in M7_SKETCH_CHANGES:
        if text.count(old) != 1:
            raise TinySegError(
                f"tinyseg_unet_m7.ino does not hold {old.strip()!r} exactly once: "
                "update M7_SKETCH_CHANGES in tinyseg_plugin/deploy/package.py"
            )
        text = text.replace(old, new)
    return text


def arduino_examples(s: Sources) -> list[PackageFile]:
    """The Nicla Vision sketches as the library's examples, and the model header generator."""
    root = s.tflm_ops.parent / "examples" / "nicla_vision"
    m7, m4 = root / "tinyseg_unet_m7", root / "tinyseg_erase_m4"
    if not (m7.is_dir() and m4.is_dir()):
        raise TinySegError(f"the Nicla Vision sketches are not in {root}")
    out = [
        PackageFile(
            f"examples/{m7.name}/{m7.name}.ino", packaged_m7_sketch(_read(m7 / f"{m7.name}.ino"))
        )
    ]
    out += [
        PackageFile(f"examples/{m7.name}/{h.name}", rewrite_includes(_read(h)))
        for h in sorted(m7.glob("*.h"))
    ]
    m4_text = _read(m4 / f"{m4.name}.ino")
    out.append(PackageFile(f"examples/{m4.name}/{m4.name}.ino", M4_SKETCH_INCLUDE + m4_text))
    out.append(PackageFile("extras/make_model_header.py", _read(root / "make_model_header.py")))
    return out


def arduino_package(s: Sources, version: str) -> list[PackageFile]:
    props = (
        f"name={NAME}\nversion={version}\nauthor=TinySeg\nmaintainer=TinySeg\n"
        "sentence=TinySeg's TFLM kernels (Spill, Fetching, FetchingConv2D, StreamChain) and runtime.\n"
        "paragraph=Registers its operators and TRANSPOSE_CONV's narrowed scratch through the op "
        "resolver; the Arduino_TensorFlowLite library is not changed.\n"
        "category=Data Processing\nurl=https://github.com/tinyseg/tinyseg-plugin\n"
        "architectures=mbed_nicla\ndepends=Arduino_TensorFlowLite\nincludes=TinySeg.h\n"
    )
    return (
        [PackageFile("library.properties", props)]
        + library_sources(s, ".cpp", True)
        + arduino_examples(s)
    )


def esp_idf_package(s: Sources, version: str) -> list[PackageFile]:
    files = library_sources(s, ".cc", False)
    srcs = "\n".join(f'    "{p}"' for p in _sources_list(files, ".cc"))
    cmake = (
        "# TinySeg as an ESP-IDF component beside espressif/esp-tflite-micro (not changed).\n"
        f"idf_component_register(\n  SRCS\n{srcs}\n"
        '  INCLUDE_DIRS "src"\n  REQUIRES esp-tflite-micro)\n'
        "target_compile_options(${COMPONENT_LIB} PRIVATE -DTF_LITE_STATIC_MEMORY)\n"
    )
    manifest = (
        f'version: "{version}"\n'
        "description: TinySeg's TFLM kernels and runtime, registered through the op resolver\n"
        'dependencies:\n  espressif/esp-tflite-micro:\n    version: ">=1.3.0"\n'
    )
    return [
        PackageFile("idf_component.yml", manifest),
        PackageFile("CMakeLists.txt", cmake),
    ] + files


def zephyr_package(s: Sources, version: str) -> list[PackageFile]:
    files = library_sources(s, ".cc", False)
    srcs = "\n".join(f"    {p}" for p in _sources_list(files, ".cc"))
    cmake = (
        "# TinySeg as a Zephyr module beside the tflite-micro module (not changed).\n"
        "if(CONFIG_TINYSEG)\n  zephyr_library()\n"
        f"  zephyr_library_sources(\n{srcs})\n"
        "  zephyr_include_directories(src)\n"
        "  zephyr_library_link_libraries(tflite-micro)\nendif()\n"
    )
    kconfig = (
        'config TINYSEG\n\tbool "TinySeg TFLM kernels and runtime"\n\tdepends on TENSORFLOW_LITE_MICRO\n'
        f"\thelp\n\t  TinySeg {version}: Spill, Fetching, FetchingConv2D, StreamChain and\n"
        "\t  TRANSPOSE_CONV's narrowed scratch, registered through the op resolver.\n"
    )
    module = "name: tinyseg\nbuild:\n  cmake: .\n  kconfig: Kconfig\n"
    return [
        PackageFile("zephyr/module.yml", module),
        PackageFile("CMakeLists.txt", cmake),
        PackageFile("Kconfig", kconfig),
    ] + files


def platformio_package(s: Sources, version: str) -> list[PackageFile]:
    manifest = (
        "{\n"
        f'  "name": "{NAME}",\n  "version": "{version}",\n'
        '  "description": "TinySeg\'s TFLM kernels and runtime, registered through the op resolver",\n'
        '  "frameworks": "arduino",\n'
        '  "dependencies": [{"name": "tflite-micro"}],\n'
        '  "build": {"srcDir": "src", "includeDir": "src", "flags": "-DTF_LITE_STATIC_MEMORY"}\n'
        "}\n"
    )
    return [PackageFile("library.json", manifest)] + library_sources(s, ".cpp", False)


BUILDERS = {
    "arduino": arduino_package,
    "esp-idf": esp_idf_package,
    "zephyr": zephyr_package,
    "platformio": platformio_package,
}


def package_files(fmt: str, sources: Sources | None = None) -> list[PackageFile]:
    """Every file of the ``fmt`` package, in memory."""
    if fmt not in BUILDERS:
        raise TinySegError(f"unknown package format {fmt!r} (one of: {', '.join(FORMATS)})")
    return BUILDERS[fmt](sources or find_sources(), package_version())


def check_destination(dest: Path, force: bool) -> None:
    """Before anything is built: DIR is absent, an empty directory, or replaced with --force."""
    if dest.exists() and not dest.is_dir():
        raise TinySegError(f"{dest} exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise TinySegError(
            f"{dest} is not empty: name a new directory, or pass --force to replace it"
        )
    if not dest.parent.is_dir():
        raise TinySegError(f"{dest.parent} is not a directory")


def write_package(files: list[PackageFile], dest: Path, force: bool = False) -> None:
    """All or nothing: the package is written into a directory beside ``dest``, then renamed."""
    check_destination(dest, force)
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    except OSError as exc:
        raise TinySegError(f"cannot write beside {dest}: {exc.strerror}") from None
    try:
        for f in files:
            path = stage / f.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f.text, encoding="utf-8")
        if dest.exists():
            shutil.rmtree(dest)
        stage.rename(dest)
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        raise TinySegError(f"cannot write {dest}: {exc.strerror}") from None
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def package(fmt: str, dest: str, force: bool = False) -> list[str]:
    """``tinyseg tflm package``: writes the package and returns the lines to print."""
    path = Path(dest).expanduser().absolute()
    check_destination(path, force)
    files = package_files(fmt)
    write_package(files, path, force)
    sources = sum(1 for f in files if f.path.endswith((".cc", ".cpp")))
    return [f"wrote the {fmt} package of TinySeg to {path} ({len(files)} files, {sources} sources)"]
