"""``tinyseg tflm install``: put TinySeg's runtime into the TFLM tree a user builds with.

TFLM reaches users in several forms, and each lays out and builds its sources differently
(docs/runtime.md, "Installing"):

=============  ===================================================  ======================
layout         how it is recognised                                 build hook
=============  ===================================================  ======================
upstream-make  tensorflow/lite/micro/tools/make/Makefile            Makefile + Makefile.inc
arduino        library.properties + src/tensorflow/lite/micro       none: Arduino compiles
               (the Arduino_TensorFlowLite library; .cpp sources)   every .cpp under src/
esp-idf        CMakeLists.txt calling idf_component_register        CMakeLists.txt (a GLOB)
zephyr         zephyr/module.yml + tensorflow/lite/micro            CMake lines printed
edge-impulse   includes prefixed edge-impulse-sdk/                  source lists printed
=============  ===================================================  ======================

What changes in a tree is only what that tree needs: the reference TRANSPOSE_CONV reads the
TinySeg scratch marker (every layout); the CMSIS-NN TRANSPOSE_CONV too where the tree has
one; the make fragments and FakeMicroContext's external context (kernel tests) only in an
upstream make tree. Every change is placed by pattern -- the line it follows or replaces is
found by what it says, never by diff context or line numbers -- and relative to the
reference scratch request, so in a file that holds several implementations behind #if
(Edge Impulse) it lands in the reference one. Added includes keep the tree's own prefix.

No tree is left half-patched: every file is read, every change computed and every problem
collected before anything is written; a refusal lists them all. Writing stages the copies
next to their destinations and restores everything on failure. A second run changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..errors import TinySegError

STAMP = "TINYSEG_INSTALLED"
STAMP_FORMAT = "tinyseg-tflm-install 2"
RUNTIME_ENV = "TINYSEG_RUNTIME_DIR"
MICRO = "tensorflow/lite/micro"
KERNELS = f"{MICRO}/kernels"
INSTALL_DIR = f"{KERNELS}/tinyseg"  # relative to the TFLM source root of every layout
LAYOUTS = ("upstream-make", "arduino", "esp-idf", "zephyr", "edge-impulse")


# ---------------------------------------------------------------- where our files are


@dataclass(frozen=True)
class Sources:
    """The runtime sources this package installs."""

    tflm_ops: Path

    def kernel_files(self) -> list[Path]:
        k = self.tflm_ops / "kernels"
        return sorted(p for pat in ("*.h", "*.cc") for p in k.glob(pat))

    def make_fragments(self) -> list[Path]:
        return sorted((self.tflm_ops / "kernels").glob("*.inc"))

    def kernel_tests(self) -> list[Path]:
        return sorted(p for p in (self.tflm_ops / "kernels" / "tests").glob("*") if p.is_file())

    def core_headers(self) -> list[Path]:
        return sorted((self.tflm_ops / "core" / "include" / "tinyseg").glob("*.h"))

    def core_sources(self) -> list[Path]:
        return sorted((self.tflm_ops / "core" / "src").glob("*.cc"))

    def nicla_files(self) -> list[Path]:
        d = self.tflm_ops / "targets" / "nicla_vision"
        return sorted(p for pat in ("*.h", "*.cc") for p in d.glob(pat))


def _usable(root: Path) -> Sources | None:
    s = Sources(root / "tflm_ops")
    if (s.tflm_ops / "kernels" / "tinyseg_ops.h").is_file() and (
        s.tflm_ops / "core" / "src"
    ).is_dir():
        return s
    return None


def find_sources() -> Sources:
    """$TINYSEG_RUNTIME_DIR, then the package's bundled copy (``_runtime``), then the source tree."""
    here = Path(__file__).resolve().parent.parent  # the package (deploy/ is one of its stages)
    candidates = []
    if os.environ.get(RUNTIME_ENV):
        candidates.append(Path(os.environ[RUNTIME_ENV]))
    candidates += [here / "_runtime", here.parent]
    for c in candidates:
        s = _usable(c)
        if s is not None:
            return s
    raise TinySegError(
        f"TinySeg runtime sources not found (looked for tflm_ops/ in "
        f"{', '.join(str(c) for c in candidates)}); set {RUNTIME_ENV}"
    )


# ---------------------------------------------------------------- tree layouts


@dataclass(frozen=True)
class TreeLayout:
    """A tree layout: one recognised kind of TFLM tree, where its sources are and how they are built
    (not the arena layout of passes/layout.py)."""

    kind: str
    root: Path  # the directory the user named
    src: Path  # the directory holding tensorflow/lite/micro
    prefix: str  # what the tree's own includes put before "tensorflow/" ("" or "edge-impulse-sdk/")
    ext: str  # source extension its build compiles (".cc"; ".cpp" in the Arduino library)

    def rel(self, path: str) -> str:
        """A path under the TFLM source root as the user sees it from the root."""
        return str((self.src / path).relative_to(self.root))


_INCLUDE_RE = re.compile(
    r'^\s*#\s*include\s+"([^"]*)tensorflow/lite/micro/kernels/kernel_util\.h"', re.M
)


def _prefix_of(text: str) -> str | None:
    m = _INCLUDE_RE.search(text)
    return m.group(1) if m else None


def detect_tree_layout(root: Path) -> TreeLayout | None:
    """The tree layout of `root`, or None when no TFLM sources are found there."""

    def ext(
        src: Path,
    ) -> str:  # the Arduino library renamed TFLM's .cc to .cpp (Arduino compiles no .cc)
        return ".cpp" if (src / KERNELS / "transpose_conv.cpp").is_file() else ".cc"

    if (
        root.name == "src"
        and (root / MICRO).is_dir()
        and (root.parent / "library.properties").is_file()
    ):
        root = root.parent  # the user named the library's src/: the library is its parent
    if (root / "src" / MICRO).is_dir() and (
        (root / "library.properties").is_file() or (root / "src" / "TensorFlowLite.h").is_file()
    ):
        return TreeLayout("arduino", root, root / "src", "", ext(root / "src"))
    src = root
    if not (root / MICRO).is_dir() and (root / "edge-impulse-sdk" / MICRO).is_dir():
        src = root / "edge-impulse-sdk"
    if not (src / MICRO).is_dir():
        return None
    tc = src / KERNELS / f"transpose_conv{ext(src)}"
    try:
        prefix = (
            _prefix_of(tc.read_text(encoding="utf-8", errors="replace")) if tc.is_file() else None
        )
    except OSError:
        prefix = None
    if (
        prefix
        or (src / "classifier" / "ei_run_classifier.h").is_file()
        or src.name == "edge-impulse-sdk"
    ):
        return TreeLayout("edge-impulse", root, src, prefix or "edge-impulse-sdk/", ext(src))
    if (root / "zephyr" / "module.yml").is_file():
        return TreeLayout("zephyr", root, src, "", ext(src))
    cmake = root / "CMakeLists.txt"
    if cmake.is_file() and "idf_component_register" in cmake.read_text(
        encoding="utf-8", errors="replace"
    ):
        return TreeLayout("esp-idf", root, src, "", ext(src))
    if (src / MICRO / "tools" / "make" / "Makefile").is_file():
        return TreeLayout("upstream-make", root, src, "", ext(src))
    return TreeLayout("unknown", root, src, "", ext(src))


# ---------------------------------------------------------------- pattern edits


class EditError(Exception):
    """A change that cannot be placed: the text it needs is not in the file."""


@dataclass
class FileEdit:
    """The new text of one tree file, or why it cannot be made."""

    path: str  # relative to the layout's root
    what: str  # one-line description for the report
    state: str = ""  # "pending", "applied", "optional-missing"
    new_text: str = ""


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _find(lines: list[str], pattern: str, start: int = 0, stop: int | None = None) -> int | None:
    rx = re.compile(pattern)
    for i in range(start, len(lines) if stop is None else stop):
        if rx.search(lines[i]):
            return i
    return None


def _find_back(lines: list[str], pattern: str, before: int) -> int | None:
    rx = re.compile(pattern)
    for i in range(before - 1, -1, -1):
        if rx.search(lines[i]):
            return i
    return None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _nl(lines: list[str]) -> str:
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def _block(indent: str, body: str, nl: str) -> list[str]:
    return [(indent + b if b else "") + nl for b in body.split("\n")]


def _scratch_request(lines: list[str]) -> int:
    """The reference int8 scratch request of TRANSPOSE_CONV: the line
    ``GetTensorShape(output).FlatSize() * sizeof(int32_t),`` inside a
    RequestScratchBufferInArena call. Every other change is placed relative to it."""
    for i, line in enumerate(lines):
        if re.search(
            r"GetTensorShape\(output\)\.FlatSize\(\)\s*\*\s*sizeof\((std::)?int32_t\)\s*,", line
        ) and any("RequestScratchBufferInArena(" in prev for prev in lines[max(0, i - 4) : i]):
            return i
    raise EditError("no int8 scratch request 'GetTensorShape(output).FlatSize() * sizeof(int32_t)'")


def edit_reference_transpose_conv(text: str, prefix: str) -> str:
    """The reference TRANSPOSE_CONV reads the marker, sizes its scratch by it and runs the
    narrowed arithmetic for a marked int8 operator (docs/custom_ops.md)."""
    lines = _lines(text)
    nl = _nl(lines)
    r = _scratch_request(lines)
    inc = _find_back(
        lines,
        rf'#\s*include\s+"{re.escape(prefix)}tensorflow/lite/micro/kernels/kernel_util\.h"',
        r,
    )
    if inc is None:
        raise EditError(
            f'no #include "{prefix}tensorflow/lite/micro/kernels/kernel_util.h" before the scratch request'
        )
    struct = _find_back(lines, r"^\s*struct OpData\s*\{", r)
    if struct is None:
        raise EditError("no 'struct OpData {' before the scratch request")
    struct_end = _find(lines, r"^\s*\};", struct, r)
    if struct_end is None:
        raise EditError("'struct OpData' is not closed before the scratch request")
    cond = _find_back(lines, r"^\s*if \(input->type == kTfLiteInt8\) \{", r)
    if cond is None or cond < struct_end:
        raise EditError("no 'if (input->type == kTfLiteInt8) {' before the scratch request")
    case = _find(lines, r"^\s*case kTfLiteInt8:\s*\{", r)
    if case is None:
        raise EditError("no 'case kTfLiteInt8: {' in Eval after the scratch request")
    data_var = _find_back(lines, r"OpData&\s+data\s*=", case)
    if data_var is None or data_var < r:
        raise EditError("Eval does not name its OpData 'data' ('const OpData& data = ...')")
    ind = _indent(lines[cond])
    out = list(lines)
    # From the bottom up, so earlier indices stay valid.
    out[case + 1 : case + 1] = _block(
        _indent(lines[case]) + "  ",
        (
            "if (data.tinyseg_marker.marked()) {  // TinySeg scratch marker\n"
            "  return tinyseg_ops::EvalTransposeConvNarrowed(\n"
            "      context, node, data.tinyseg_marker, data.params,\n"
            "      data.per_channel_output_multiplier, data.per_channel_output_shift,\n"
            "      data.scratch_buffer_index);\n"
            "}"
        ),
        nl,
    )
    req = lines[r]
    out[r] = req[: len(req) - len(req.lstrip())] + (
        "tinyseg_ops::TransposeConvScratchBytes(data->tinyseg_marker, GetTensorShape(output)),  // TinySeg"
        + nl
    )
    out[cond:cond] = _block(
        ind,
        (
            "// TinySeg: a scratch marker narrows the int8 accumulator.\n"
            "TF_LITE_ENSURE_STATUS(tinyseg_ops::ReadTransposeConvMarker(\n"
            "    context, node, input->type, &data->tinyseg_marker));"
        ),
        nl,
    )
    out[struct_end:struct_end] = _block(
        _indent(lines[struct_end]) + "  ",
        "tinyseg_ops::TransposeConvMarker tinyseg_marker;  // TinySeg",
        nl,
    )
    out[inc + 1 : inc + 1] = [
        f'#include "{prefix}tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv.h"  // TinySeg{nl}'
    ]
    return "".join(out)


def edit_cmsis_transpose_conv(text: str, prefix: str) -> str:
    """CMSIS-NN's TRANSPOSE_CONV: a marked int8 operator requests the narrowed accumulator
    instead of CMSIS-NN's two buffers and runs the portable arithmetic."""
    lines = _lines(text)
    nl = _nl(lines)
    size_call = _find(
        lines,
        r"arm_transpose_conv_s8_get_buffer_size|arm_transpose_conv_s8_get_reverse_conv_buffer_size",
    )
    if size_call is None:
        raise EditError("no arm_transpose_conv_s8_get_buffer_size call")
    inc = _find_back(
        lines,
        rf'#\s*include\s+"{re.escape(prefix)}tensorflow/lite/micro/kernels/kernel_util\.h"',
        size_call,
    )
    struct = _find_back(lines, r"^\s*struct OpData\s*\{", size_call)
    struct_end = _find(lines, r"^\s*\};", struct, size_call) if struct is not None else None
    cond = _find_back(lines, r"^\s*if \(input->type == kTfLiteInt8\) \{", size_call)
    ev = _find(lines, r"EvalQuantizedPerChannel\(", size_call)
    body = _find(lines, r"\)\s*\{\s*$", ev) if ev is not None else None
    for what, at in (
        ("kernel_util.h include", inc),
        ("struct OpData", struct),
        ("end of struct OpData", struct_end),
        ("'if (input->type == kTfLiteInt8) {' in Prepare", cond),
        ("EvalQuantizedPerChannel", body),
    ):
        if at is None:
            raise EditError(f"no {what}")
    out = list(lines)
    out[body + 1 : body + 1] = _block(
        "  ",
        (
            "if (data.tinyseg_marker.marked()) {  // TinySeg scratch marker\n"
            "  return tinyseg_ops::EvalTransposeConvNarrowed(\n"
            "      context, node, data.tinyseg_marker, data.params,\n"
            "      data.per_channel_output_multiplier, data.per_channel_output_shift,\n"
            "      data.scratch_buffer_index);\n"
            "}"
        ),
        nl,
    )
    ind = _indent(lines[cond])
    out[cond : cond + 1] = _block(
        ind,
        (
            "// TinySeg: a scratch marker replaces CMSIS-NN's buffers by the narrowed\n"
            "// accumulator of the portable reference arithmetic.\n"
            "TF_LITE_ENSURE_STATUS(tinyseg_ops::ReadTransposeConvMarker(\n"
            "    context, node, input->type, &data->tinyseg_marker));\n"
            "if (input->type == kTfLiteInt8 && data->tinyseg_marker.marked()) {\n"
            "  TF_LITE_ENSURE_STATUS(context->RequestScratchBufferInArena(\n"
            "      context,\n"
            "      tinyseg_ops::TransposeConvScratchBytes(data->tinyseg_marker,\n"
            "                                             GetTensorShape(output)),\n"
            "      &(data->scratch_buffer_index)));\n"
            "} else if (input->type == kTfLiteInt8) {"
        ),
        nl,
    )
    out[struct_end:struct_end] = _block(
        _indent(lines[struct_end]) + "  ",
        "tinyseg_ops::TransposeConvMarker tinyseg_marker;  // TinySeg",
        nl,
    )
    out[inc + 1 : inc + 1] = [
        f'#include "{prefix}tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv.h"  // TinySeg{nl}'
    ]
    return "".join(out)


def edit_fake_context_cc(text: str) -> str:
    """FakeMicroContext keeps an external context, so kernel tests can attach a runtime."""
    lines = _lines(text)
    nl = _nl(lines)
    s = _find(lines, r"FakeMicroContext::set_external_context\(")
    ret = (
        _find(lines, r"^\s*return kTfLiteError;\s*$", s, min(len(lines), s + 4))
        if s is not None
        else None
    )
    g = _find(lines, r"^void\* FakeMicroContext::external_context\(\)\s*\{\s*return nullptr;\s*\}")
    if ret is None or g is None:
        raise EditError(
            "set_external_context/external_context are not the stubs that return an error/nullptr"
        )
    out = list(lines)
    out[g : g + 1] = _block(
        "",
        (
            "void* FakeMicroContext::external_context() {  // TinySeg: kept for kernel tests\n"
            "  return external_context_payload_;\n"
            "}"
        ),
        nl,
    )
    out[ret : ret + 1] = _block(
        "  ",
        (
            "if (external_context_payload == nullptr ||  // TinySeg: kept for kernel tests\n"
            "    external_context_payload_ != nullptr) {\n"
            "  return kTfLiteError;\n"
            "}\n"
            "external_context_payload_ = external_context_payload;\n"
            "return kTfLiteOk;"
        ),
        nl,
    )
    return "".join(out)


def edit_fake_context_h(text: str) -> str:
    lines = _lines(text)
    a = _find(lines, r"^\s*SingleArenaBufferAllocator\*\s+allocator_;")
    if a is None:
        raise EditError("no 'SingleArenaBufferAllocator* allocator_;' member")
    out = list(lines)
    out[a + 1 : a + 1] = _block(
        _indent(lines[a]),
        (
            "\n// TinySeg: set once by set_external_context (kernel tests attach their runtime).\n"
            "void* external_context_payload_ = nullptr;"
        ),
        _nl(lines),
    )
    return "".join(out)


def edit_makefile(text: str) -> str:
    """Our make fragment joins microlite right where TFLM collects its kernel sources: after
    sources.inc (2026-02 on), else before the block that specialises MICROLITE_CC_KERNEL_SRCS
    for OPTIMIZED_KERNEL_DIR (older trees)."""
    lines = _lines(text)
    nl = _nl(lines)
    add = _block(
        "",
        (
            "\n# TinySeg kernels and runtime core (installed by `tinyseg tflm install`).\n"
            "include $(TENSORFLOW_ROOT)tensorflow/lite/micro/kernels/tinyseg/tinyseg.inc"
        ),
        nl,
    )
    at = _find(lines, r"^include \$\(MAKEFILE_DIR\)/sources\.inc")
    if at is not None:
        return "".join(lines[: at + 1] + add + lines[at + 1 :])
    spec = _find(lines, r"^\s*MICROLITE_CC_KERNEL_SRCS\s*:=\s*\$\(shell .*specialize_files\.py")
    cond = _find_back(lines, r"^if(n?eq|n?def)\b", spec) if spec is not None else None
    if cond is None:
        raise EditError(
            "neither 'include $(MAKEFILE_DIR)/sources.inc' nor the OPTIMIZED_KERNEL_DIR "
            "specialisation of MICROLITE_CC_KERNEL_SRCS"
        )
    return "".join(lines[:cond] + add[1:] + [nl] + lines[cond:])


def edit_kernels_makefile_inc(text: str) -> str:
    if "microlite_test" not in text:
        raise EditError("no microlite_test test targets")
    nl = _nl(_lines(text))
    end = "" if text.endswith(("\n", "\r\n")) else nl
    return (
        text
        + end
        + nl
        + "# TinySeg kernel tests (installed by `tinyseg tflm install`)."
        + nl
        + "include $(TENSORFLOW_ROOT)tensorflow/lite/micro/kernels/tinyseg/tinyseg_tests.inc"
        + nl
    )


def edit_esp_cmake(text: str) -> str:
    """The component's GLOB of kernels/*.cc does not recurse: add ours to its source list."""
    lines = _lines(text)
    nl = _nl(lines)
    lib = _find(lines, r'^\s*"\$\{srcs_kernels\}"\s*$')
    start = _find_back(lines, r"^\s*set\(lib_srcs\b", lib) if lib is not None else None
    if lib is None or start is None:
        raise EditError('no "${srcs_kernels}" entry in set(lib_srcs ...)')
    out = list(lines)
    out[lib + 1 : lib + 1] = [_indent(lines[lib]) + '"${srcs_tinyseg}"' + nl]
    out[start:start] = _block(
        "",
        (
            "# TinySeg kernels and runtime core (installed by `tinyseg tflm install`).\n"
            'file(GLOB srcs_tinyseg "${tfmicro_kernels_dir}/tinyseg/*.cc")\n'
        ),
        nl,
    )
    return "".join(out)


@dataclass(frozen=True)
class Change:
    """One tree file we change: how, whether it must exist, and how to tell it is done."""

    path: str  # relative to the TFLM source root (src) or the layout root
    what: str
    edit: Callable[[str], str]
    signature: tuple[str, ...]  # lines that are all in the file once it is changed
    required: bool = True
    from_root: bool = False  # path is relative to the layout root, not src
    for_tests: bool = False  # only needed for the kernel tests


def _state(text: str, signature: tuple[str, ...]) -> str:
    """ "applied" (every signature line there), "clean" (none) or "partial"."""
    have = sum(s in text for s in signature)
    return "applied" if have == len(signature) else "clean" if have == 0 else "partial"


_TCONV_SIG = (
    "tinyseg/tinyseg_transpose_conv.h",
    "tinyseg_ops::TransposeConvMarker tinyseg_marker;",
    "tinyseg_ops::ReadTransposeConvMarker(",
    "tinyseg_ops::TransposeConvScratchBytes(",
    "tinyseg_ops::EvalTransposeConvNarrowed(",
)
_FAKE_CC_SIG = (
    "external_context_payload_ = external_context_payload;",
    "return external_context_payload_;",
)


def changes_for(layout: TreeLayout) -> list[Change]:
    ext, p = layout.ext, layout.prefix
    ch = [
        Change(
            f"{KERNELS}/transpose_conv{ext}",
            "reference TRANSPOSE_CONV reads the scratch marker",
            lambda t: edit_reference_transpose_conv(t, p),
            _TCONV_SIG,
        )
    ]
    cmsis = Change(
        f"{KERNELS}/cmsis_nn/transpose_conv{ext}",
        "CMSIS-NN TRANSPOSE_CONV reads the scratch marker",
        lambda t: edit_cmsis_transpose_conv(t, p),
        _TCONV_SIG,
        required=False,
    )
    if layout.kind == "upstream-make":
        ch += [
            cmsis,
            Change(
                f"{MICRO}/tools/make/Makefile",
                "make: TinySeg sources join microlite",
                edit_makefile,
                ("kernels/tinyseg/tinyseg.inc",),
            ),
            Change(
                f"{KERNELS}/Makefile.inc",
                "make: TinySeg kernel tests",
                edit_kernels_makefile_inc,
                ("kernels/tinyseg/tinyseg_tests.inc",),
                for_tests=True,
            ),
            Change(
                f"{MICRO}/fake_micro_context.cc",
                "FakeMicroContext keeps an external context",
                edit_fake_context_cc,
                _FAKE_CC_SIG,
                for_tests=True,
            ),
            Change(
                f"{MICRO}/fake_micro_context.h",
                "FakeMicroContext keeps an external context",
                edit_fake_context_h,
                ("void* external_context_payload_ = nullptr;",),
                for_tests=True,
            ),
        ]
    elif layout.kind == "esp-idf":
        ch.append(
            Change(
                "CMakeLists.txt",
                "CMake: TinySeg sources join the component",
                edit_esp_cmake,
                ('"${srcs_tinyseg}"', "kernels_dir}/tinyseg/*.cc"),
                from_root=True,
            )
        )
    else:  # Zephyr and Edge Impulse may ship a CMSIS-NN TRANSPOSE_CONV; their builds decide
        ch.append(cmsis)
    return ch


# Files our kernels include, beyond those changed (relative to src).
NEEDED = (
    "micro_interpreter.h",
    "micro_mutable_op_resolver.h",
    "micro_context.h",
    "kernels/kernel_util.h",
    "micro_log.h",
)


# ---------------------------------------------------------------- what is copied where


def _prefixed(text: str, prefix: str) -> str:
    """Our sources with the tree's include prefix (Edge Impulse); also inside __has_include."""
    if not prefix:
        return text
    return re.sub(
        r'((?:#\s*include\s*|__has_include\s*\(\s*)")(tensorflow/|third_party/|tinyseg/)',
        lambda m: m.group(1) + prefix + m.group(2),
        text,
    )


@dataclass
class CopyUnit:
    """A directory we own in the tree: its files (relative name -> bytes) and a stamp."""

    dest: str  # relative to the layout root
    files: dict[str, bytes] = field(default_factory=dict)

    def digest(self) -> str:
        h = hashlib.sha256()
        for rel in sorted(self.files):
            h.update(rel.encode() + b"\0" + self.files[rel] + b"\0")
        return h.hexdigest()

    def stamp(self) -> bytes:
        return f"{STAMP_FORMAT}\ndigest {self.digest()}\n".encode()


def copy_units(layout: TreeLayout, sources: Sources, with_tests: bool) -> list[CopyUnit]:
    def body(p: Path) -> bytes:
        return _prefixed(p.read_text(encoding="utf-8"), layout.prefix).encode("utf-8")

    def src_name(p: Path) -> str:
        return p.stem + layout.ext if p.suffix == ".cc" else p.name

    kern = CopyUnit(layout.rel(INSTALL_DIR))
    for p in sources.kernel_files():
        kern.files[src_name(p)] = body(p)
    if layout.kind == "upstream-make":
        for p in sources.make_fragments():
            kern.files[p.name] = body(p)
        if with_tests:
            for p in sources.kernel_tests():
                kern.files[f"tests/{p.name}"] = body(p)
        for p in sources.core_headers():
            kern.files[f"core/include/tinyseg/{p.name}"] = body(p)
        for p in sources.core_sources():
            kern.files[f"core/src/{p.name}"] = body(p)
        return [kern]
    # Forks: the core's .cc files sit beside the kernels (one flat directory, as a GLOB or
    # Arduino's compile of src/ takes it) and its headers at the include root as tinyseg/,
    # so "tinyseg/..." resolves with no new include path.
    for p in sources.core_sources():
        kern.files[f"tinyseg_core_{src_name(p)}"] = body(p)
    core = CopyUnit(layout.rel("tinyseg"))
    for p in sources.core_headers():
        core.files[p.name] = body(p)
    units = [kern, core]
    if layout.kind == "arduino":
        nicla = CopyUnit(layout.rel("tinyseg_nicla"))
        for p in sources.nicla_files():
            nicla.files[src_name(p)] = body(p)
        units.append(nicla)
    return units


def unit_state(root: Path, unit: CopyUnit) -> str:
    """ "missing", "current" or "outdated" (our stamp, other content). A directory we did not write is an error."""
    dest = root / unit.dest
    if not dest.exists():
        return "missing"
    stamp = dest / STAMP
    if not dest.is_dir() or not stamp.is_file():
        raise TinySegError(
            f"{dest} exists but was not written by tinyseg (no {STAMP}); move it away and retry"
        )
    try:
        current = stamp.read_bytes() == unit.stamp() and all(
            (dest / rel).is_file() and (dest / rel).read_bytes() == data
            for rel, data in unit.files.items()
        )
    except OSError as exc:
        raise TinySegError(f"cannot read {dest}: {exc}") from None
    return "current" if current else "outdated"


# ---------------------------------------------------------------- the plan


@dataclass
class InstallPlan:
    layout: TreeLayout
    edits: list[FileEdit]
    units: list[CopyUnit]
    unit_states: list[str]
    with_tests: bool
    problems: list[str]

    def pending(self) -> bool:
        return any(e.state == "pending" for e in self.edits) or any(
            s != "current" for s in self.unit_states
        )


def _describe(layout: TreeLayout | None, root: Path) -> str:
    if layout is None:
        return "no TFLM sources (no tensorflow/lite/micro, src/tensorflow/lite/micro or edge-impulse-sdk/)"
    return {
        "upstream-make": "an upstream tflite-micro make tree",
        "arduino": "the Arduino_TensorFlowLite library (src/, .cpp sources)",
        "esp-idf": "an ESP-IDF component (esp-tflite-micro)",
        "zephyr": "Zephyr's tflite-micro module",
        "edge-impulse": f"the Edge Impulse SDK (includes prefixed {layout.prefix})",
        "unknown": "TFLM sources without a build I know (no make/Makefile, library.properties, "
        "idf_component_register, zephyr/module.yml or edge-impulse-sdk prefix)",
    }[layout.kind]


def make_plan(root: Path, sources: Sources) -> InstallPlan:
    """Read everything, compute every change, collect every problem; write nothing."""
    layout = detect_tree_layout(root)
    if layout is None or layout.kind == "unknown":
        raise TinySegError(
            f"{root}: found {_describe(layout, root)}; point --tflm-dir at a tflite-micro checkout, the "
            "Arduino_TensorFlowLite library folder, esp-tflite-micro, Zephyr's tflite-micro module or "
            "edge-impulse-sdk/ (docs/runtime.md)"
        )
    problems: list[str] = []
    for rel in NEEDED:
        path = f"{MICRO}/{rel}"
        if not (layout.src / path).is_file():
            problems.append(f"missing {layout.rel(path)}")
    edits: list[FileEdit] = []
    test_edits: list[FileEdit] = []
    tests_possible = layout.kind == "upstream-make"
    for c in changes_for(layout):
        path = layout.root / c.path if c.from_root else layout.src / c.path
        shown = str(path.relative_to(layout.root))
        fe = FileEdit(shown, c.what)
        (test_edits if c.for_tests else edits).append(fe)
        if not path.is_file():
            fe.state = "optional-missing"
            if c.for_tests:
                tests_possible = False
            elif c.required:
                problems.append(f"missing {shown}")
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"cannot read {shown}: {exc}")
            continue
        state = _state(text, c.signature)
        if state == "applied":
            fe.state = "applied"
        elif state == "partial":
            problems.append(
                f"{shown} is partly changed by an earlier install or by hand; restore it"
            )
        else:
            try:
                fe.new_text = c.edit(text)
                fe.state = "pending"
            except EditError as exc:
                if c.for_tests:  # the runtime works without; only its kernel tests do not
                    fe.state = "optional-missing"
                    tests_possible = False
                else:
                    problems.append(f"{shown}: {exc}")
    with_tests = tests_possible
    if with_tests:  # the test-only changes are made all together or not at all
        edits += test_edits
    units = copy_units(layout, sources, with_tests)
    states: list[str] = []
    for u in units:
        try:
            states.append(unit_state(layout.root, u))
        except TinySegError as exc:
            problems.append(str(exc))
            states.append("missing")
    return InstallPlan(layout, edits, units, states, with_tests, problems)


# ---------------------------------------------------------------- writing, all or nothing


def _write_all(root: Path, plan: InstallPlan) -> None:
    """Stage the copies, write the changed files, swap the copies in; on failure undo everything."""
    staged: list[tuple[Path, Path]] = []  # (staging dir, destination)
    moved_old: list[tuple[Path, Path]] = []  # (old copy, destination)
    swapped: list[Path] = []
    written: list[tuple[Path, bytes, int]] = []
    texts = [(root / e.path, e.new_text) for e in plan.edits if e.state == "pending"]
    try:
        for unit, state in zip(plan.units, plan.unit_states):
            if state == "current":
                continue
            dest = root / unit.dest
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tinyseg-staged-", dir=dest.parent))
            staged.append((tmp, dest))
            for rel, data in unit.files.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).write_bytes(data)
            (tmp / STAMP).write_bytes(unit.stamp())
        for path, text in texts:
            original = path.read_bytes()
            mode = path.stat().st_mode
            tmp = path.with_name(f".{path.name}.tinyseg-tmp")
            tmp.write_bytes(text.encode("utf-8"))
            os.chmod(tmp, mode & 0o7777)
            os.replace(tmp, path)
            written.append((path, original, mode))
        for tmp, dest in staged:
            if dest.exists():
                old = Path(tempfile.mkdtemp(prefix=".tinyseg-old-", dir=dest.parent))
                os.rmdir(old)
                os.replace(dest, old)
                moved_old.append((old, dest))
            os.replace(tmp, dest)
            swapped.append(dest)
    except OSError as exc:
        for path, original, mode in reversed(written):
            try:
                tmp = path.with_name(f".{path.name}.tinyseg-tmp")
                tmp.write_bytes(original)
                os.chmod(tmp, mode & 0o7777)
                os.replace(tmp, path)
            except OSError:
                pass
        for path, _ in texts:
            path.with_name(f".{path.name}.tinyseg-tmp").unlink(missing_ok=True)
        for dest in swapped:
            shutil.rmtree(dest, ignore_errors=True)
        for old, dest in moved_old:
            if not dest.exists():
                try:
                    os.replace(old, dest)
                except OSError:
                    pass
        for tmp, _ in staged:
            shutil.rmtree(tmp, ignore_errors=True)
        raise TinySegError(
            f"installing into {root} failed ({exc}); the tree was restored"
        ) from None
    for tmp, _ in staged:
        shutil.rmtree(tmp, ignore_errors=True)
    for old, _ in moved_old:
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- what the user does next


def next_steps(layout: TreeLayout, with_tests: bool) -> list[str]:
    k = layout.rel(INSTALL_DIR)
    if layout.kind == "upstream-make":
        steps = [
            "next: make -f tensorflow/lite/micro/tools/make/Makefile microlite "
            "(add OPTIMIZED_KERNEL_DIR=cmsis_nn TARGET=cortex_m_generic TARGET_ARCH=cortex-m7 for the board); "
            "plan with `tinyseg optimize --kernel-set reference` (or --kernel-set cmsis-nn)"
        ]
        if with_tests:
            steps.append(
                "kernel tests: make -f tensorflow/lite/micro/tools/make/Makefile "
                "test_kernel_tinyseg_transpose_conv_test (also _fetching_conv_, _spill_fetching_)"
            )
        return steps
    if layout.kind == "arduino":
        steps = [
            "next: nothing to add to a build file: the Arduino IDE / arduino-cli compiles every .cpp "
            f"under {layout.rel('')}; compile examples/nicla_vision/tinyseg_unet_m7 with "
            "`arduino-cli compile -b arduino:mbed_nicla:nicla_vision --library "
            f"{layout.root}`; plan with `tinyseg optimize --kernel-set arduino`"
        ]
        periph = layout.src / "peripherals" / "peripherals.h"
        try:
            nano_only = periph.is_file() and "unsupported board" in periph.read_text(
                errors="replace"
            )
        except OSError:
            nano_only = False
        if nano_only:
            steps.append(
                f"note: {layout.rel('peripherals')} of this library builds only for the Nano 33 BLE "
                '(#error "unsupported board" elsewhere, and arduino-cli compiles all of src/): '
                "for another board (Nicla Vision) move that folder out of the library first"
            )
        return steps
    if layout.kind == "esp-idf":
        return [
            "next: CMakeLists.txt now compiles tensorflow/lite/micro/kernels/tinyseg/*.cc; "
            "`idf.py build` in your project; plan with `tinyseg optimize --kernel-set esp-idf`"
        ]
    if layout.kind == "zephyr":
        return [
            "next: add to the zephyr_library_sources(...) list of your module's CMakeLists.txt "
            f"(Zephyr lists sources by hand): ${{ZEPHYR_CURRENT_MODULE_DIR}}/{k}/*.cc, i.e. "
            f"file(GLOB TINYSEG_SRCS ${{ZEPHYR_CURRENT_MODULE_DIR}}/{k}/*.cc) then "
            "zephyr_library_sources(${TINYSEG_SRCS}); `west build`; plan with `tinyseg optimize --kernel-set zephyr`"
        ]
    return [
        "next: add the .cc files of "
        + k
        + " to your project's sources (Edge Impulse exports list the "
        f"SDK's sources in their Makefile/CMakeLists: add {k}/*.cc beside "
        f"{layout.rel('tensorflow/lite/micro/kernels')}/*.cc); the include root stays the directory "
        "that holds edge-impulse-sdk/; plan with `tinyseg optimize --kernel-set edge-impulse`"
    ]


# ---------------------------------------------------------------- the command


def check_dir(tflm_dir: str) -> Path:
    root = Path(tflm_dir).expanduser()
    if not root.exists():
        raise TinySegError(f"{tflm_dir}: no such directory")
    if not root.is_dir():
        raise TinySegError(f"{tflm_dir}: not a directory")
    return root.resolve()


def install(tflm_dir: str, check_only: bool = False) -> Iterable[str]:
    """Install (or with check_only, only check) TinySeg in a TFLM tree; returns the lines to print."""
    root = check_dir(tflm_dir)
    sources = find_sources()
    plan = make_plan(root, sources)
    layout = plan.layout
    if plan.problems:
        raise TinySegError(
            f"{root}: found {_describe(layout, root)}, but cannot install: {'; '.join(plan.problems)}. "
            "Nothing was changed; restore those files (e.g. git checkout) or use a tree of a supported "
            "version (docs/runtime.md)"
        )
    lines = [f"{_describe(layout, root)}: {root}"]
    if not plan.pending():
        return (
            lines
            + [f"already installed in {root} (nothing changed)"]
            + next_steps(layout, plan.with_tests)
        )
    for e in plan.edits:
        if e.state == "applied":
            lines.append(f"{e.path}: already changed ({e.what})")
        elif e.state == "pending":
            lines.append(f"{e.path}: {'would change' if check_only else 'changed'} ({e.what})")
    for u, s in zip(plan.units, plan.unit_states):
        verb = {
            "missing": ("would copy", "copied"),
            "outdated": ("would update", "updated"),
            "current": ("keeps", "kept"),
        }[s][0 if check_only else 1]
        lines.append(f"{u.dest}: {verb} {len(u.files)} files")
    if check_only:
        return lines + ["check passed: nothing was changed"]
    _write_all(root, plan)
    return lines + [f"installed TinySeg into {root}"] + next_steps(layout, plan.with_tests)
