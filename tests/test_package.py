"""`tinyseg tflm package`: each format written, and the Arduino library and the ESP-IDF component
compiled against the pinned snapshots of their TFLM packages, which are NOT changed (no
`tinyseg tflm install`): the package must stand beside them.

* Arduino: every .cpp under the package's src/ for the Nicla Vision M7, and the two sketches of
  its examples/ (M7 and M4), as tests/test_nicla_build.py compiles (the core's flags, the
  Arduino_TensorFlowLite snapshot tflite-micro-arduino-examples-7948b85 unpacked into tmp).
  Skipped, like that module, without ARDUINO_MBED_CORE_DIR.
* ESP-IDF: every .cc of the component and a user of TinySeg.h (AddOps, OpResolver,
  MicroInterpreter) with the host g++ (-fsyntax-only -std=gnu++17) against the
  esp-tflite-micro-99f49e1 snapshot's include directories: no Xtensa toolchain is installed.
Zephyr and PlatformIO packages are written and checked for their manifests, not compiled.
Compiles run two at a time; a warning located in the package's files fails as an error does
(ESP-IDF: -Wall -Wextra without -Wunused-parameter; TFLM's headers are -isystem).
"""

from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_nicla_build import (
    EXAMPLES,
    STORAGES,
    THIRD_PARTY,
    Compile,
    OurFiles,
    Toolchain,
    assert_clean,
    make_model_header,
    prepare_sketch,
    run_compile,
    sketch_library_dirs,
    toolchain,  # noqa: F401  (fixture)
)

from tinyseg_plugin.cli import main
from tinyseg_plugin.deploy.package import FORMATS, M7_SKETCH_CHANGES, packaged_m7_sketch
from tinyseg_plugin.errors import TinySegError

ARDUINO_SNAPSHOT = "tflite-micro-arduino-examples-7948b85"
ESP_SNAPSHOT = "esp-tflite-micro-99f49e1"
WORKERS = 2
TIMEOUT_S = 600

USER = """#include <TinySeg.h>
TfLiteStatus Use(const tflite::Model* model, uint8_t* arena, size_t bytes) {
  static tflite::MicroMutableOpResolver<2 + tinyseg::kOpCount> ops;
  TF_LITE_ENSURE_STATUS(ops.AddConv2D());
  TF_LITE_ENSURE_STATUS(tinyseg::AddOps(ops));
  static tinyseg::OpResolver<2 + tinyseg::kOpCount> resolver(ops);
  tflite::MicroInterpreter interpreter(model, resolver, arena, bytes);
  return interpreter.AllocateTensors();
}
"""


def write(fmt: str, dest: Path) -> Path:
    assert main(["tflm", "package", "--format", fmt, str(dest)]) == 0
    return dest


def unpacked(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    unpack = THIRD_PARTY / "unpack.sh"
    if not unpack.is_file():
        pytest.skip(f"{unpack} not present")
    r = subprocess.run(
        ["bash", str(unpack), name, str(tmp_path_factory.mktemp("third_party"))],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if r.returncode != 0:
        pytest.skip(f"unpack.sh {name}: {r.stderr.strip()}")
    root = Path(r.stdout.strip())
    assert not list(root.rglob("*tinyseg*")), "the snapshot must be TFLM as users get it"
    return root


# ---------------------------------------------------------------- every format


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_written(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture) -> None:
    pkg = write(fmt, tmp_path / fmt)
    assert f"wrote the {fmt} package" in capsys.readouterr().out
    manifest = {
        "arduino": "library.properties",
        "esp-idf": "idf_component.yml",
        "zephyr": "zephyr/module.yml",
        "platformio": "library.json",
    }[fmt]
    assert (pkg / manifest).is_file() and (pkg / "src" / "TinySeg.h").is_file()
    assert not (pkg / "src" / "tensorflow").exists(), "nothing in TFLM's own tree"
    for f in pkg.rglob("*"):
        if f.is_file():
            assert "tensorflow/lite/micro/kernels/tinyseg" not in f.read_text(), f
    ext = ".cpp" if fmt in ("arduino", "platformio") else ".cc"
    assert (pkg / "src/tinyseg/kernels" / f"tinyseg_transpose_conv_op{ext}").is_file()
    assert not [p for p in pkg.rglob("*.cc" if ext == ".cpp" else "*.cpp")]
    if fmt == "esp-idf":
        cmake = (pkg / "CMakeLists.txt").read_text()
        listed = {line.strip().strip('"') for line in cmake.splitlines() if "src/" in line}
        assert listed == {str(p.relative_to(pkg)) for p in pkg.rglob("*.cc")}
        assert "espressif/esp-tflite-micro" in (pkg / "idf_component.yml").read_text()
    if fmt == "arduino":
        props = (pkg / "library.properties").read_text()
        assert "name=TinySeg\n" in props and "depends=Arduino_TensorFlowLite\n" in props
        assert (pkg / "examples/tinyseg_unet_m7/tinyseg_unet_m7.ino").is_file()


def test_bad_format_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["tflm", "package", "--format", "cmake", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'cmake'" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_non_empty_dir_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    dest = tmp_path / "p"
    dest.mkdir()
    (dest / "mine.txt").write_text("kept")
    assert main(["tflm", "package", "--format", "arduino", str(dest)]) == 2
    err = capsys.readouterr().err
    assert "is not empty" in err and err.count("\n") == 1
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"], "no staging directory left"
    assert main(["tflm", "package", "--format", "arduino", "--force", str(dest)]) == 0
    assert not (dest / "mine.txt").exists() and (dest / "library.properties").is_file()


def test_sketch_that_changed_is_refused() -> None:
    text = (EXAMPLES / "tinyseg_unet_m7" / "tinyseg_unet_m7.ino").read_text()
    assert "tinyseg::AddOps(resolver)" in packaged_m7_sketch(text)
    with pytest.raises(TinySegError, match="exactly once"):
        packaged_m7_sketch(text.replace(M7_SKETCH_CHANGES[-1][0], "elsewhere"))


# ---------------------------------------------------------------- Arduino: the Nicla Vision


def m7_sketch(pkg: Path, build: Path) -> Path:
    cpp = prepare_sketch(pkg / "examples" / "tinyseg_unet_m7", build)
    placeholder = (
        bytes(4) + b"TFL3" + bytes(8)
    )  # the symbols the sketch uses, as in test_nicla_build
    (build / "model_data.h").write_text(
        make_model_header.header_text(
            placeholder, "g_tinyseg_model", "placeholder.tflite", 160 * 1024
        )
    )
    return cpp


def test_arduino_library_compiles(
    toolchain: Toolchain,  # noqa: F811
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    library = unpacked(tmp_path_factory, ARDUINO_SNAPSHOT) / "src"
    pkg = write("arduino", tmp_path / "TinySeg")
    src = pkg / "src"
    ours = OurFiles((pkg.resolve(), (tmp_path / "sketch").resolve()))
    m7, m4 = toolchain.targets["cm7"], toolchain.targets["cm4"]
    extra = sketch_library_dirs(toolchain)
    jobs = [
        (m7, p, [src, library], (), str(p.relative_to(pkg))) for p in sorted(src.rglob("*.cpp"))
    ]
    jobs.append(
        (
            m7,
            m7_sketch(pkg, tmp_path / "sketch" / "m7"),
            [src, library] + extra,
            (f"-DTINYSEG_STORAGE={STORAGES['qspi']}", "-DTINYSEG_ASYNC_ERASE=1"),
            "M7 sketch",
        )
    )
    m4_cpp = prepare_sketch(pkg / "examples" / "tinyseg_erase_m4", tmp_path / "sketch" / "m4")
    jobs.append(
        (
            m4,
            m4_cpp,
            [src, library] + extra,
            (f"-DTINYSEG_STORAGE={STORAGES['qspi']}",),
            "M4 sketch",
        )
    )

    def one(job: tuple) -> tuple[str, Compile]:
        target, source, dirs, defines, what = job
        work = tmp_path / "obj" / what.replace("/", "_")
        work.mkdir(parents=True)
        return what, run_compile(toolchain, target, source, dirs, work, defines)

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(one, jobs))
    assert len(results) > 30
    for what, result in results:
        assert_clean(result, ours, what)


# ---------------------------------------------------------------- ESP-IDF: the host compiler


def test_esp_idf_component_compiles(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no host g++")
    esp = unpacked(tmp_path_factory, ESP_SNAPSHOT)
    pkg = write("esp-idf", tmp_path / "tinyseg")
    (tmp_path / "use_tinyseg.cc").write_text(USER)
    sources = sorted((pkg / "src").rglob("*.cc")) + [tmp_path / "use_tinyseg.cc"]
    system = [esp] + [
        esp / "third_party" / d for d in ("gemmlowp", "flatbuffers/include", "ruy", "kissfft")
    ]
    # -Wextra's unused-parameter is off: the kernels name parameters only some builds use.
    warnings = ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    flags = [cxx, "-fsyntax-only", "-std=gnu++17", *warnings, "-DTF_LITE_STATIC_MEMORY"]
    flags += [f"-I{pkg / 'src'}"] + [f"-isystem{d}" for d in system]
    batches = [sources[i::WORKERS] for i in range(WORKERS)]

    def one(batch: list[Path]) -> subprocess.CompletedProcess:
        cmd = flags + [str(s) for s in batch]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(one, batches))
    assert len(sources) > 30
    for r in results:
        text = (r.stdout + r.stderr)[:12000]
        assert r.returncode == 0 and "warning:" not in text, f"{' '.join(r.args)}\n{text}"
