"""A precompiled header of TFLM's flatbuffers schema for the tests that compile TinySeg's kernels in
a tree with that tree's flags (upstream, ESP-IDF, Edge Impulse, the Arduino library and its
package, the Nicla Vision's cores): the schema is about a quarter of what the compiler reads for
each kernel source, and each test compiles some thirty of them.

The header is built with the test's own compiler and flags, so the compiles check what they
checked before: GCC uses a precompiled header only when the flags that matter agree, and reads the
header's text otherwise. When the header does not build, the compiles go on without it and report
whatever is wrong with the schema themselves.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

SCHEMA = "tensorflow/lite/schema/schema_generated.h"

# Flags that name what a compile writes or whether it writes, and the sources' language (an
# earlier `-x c++` makes GCC link the header rather than precompile it): not the header's build.
_OUTPUT_FLAGS = {"-c", "-fsyntax-only", "-MMD", "-MD", "-MP"}
_OUTPUT_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ", "-x"}


def header_flags(cmd: list[str]) -> list[str]:
    """`cmd` (the compiler, then its flags; no source) without what names an output or a language."""
    out: list[str] = []
    skip = False
    for a in cmd:
        if skip:
            skip = False
        elif a in _OUTPUT_WITH_VALUE:
            skip = True
        elif a not in _OUTPUT_FLAGS:
            out.append(a)
    return out


def include_args(
    cmd: list[str], folder: Path, cwd: Path | None = None, first: tuple[str, ...] = ()
) -> list[str]:
    """["-include", header] to put in front of a source in `cmd` (the compiler and its flags, no
    source, run in `cwd`), after building the header's precompiled form in `folder` with those
    flags; [] when it does not build. ``first``: headers the command already puts first with -include (which the
    precompiled header then holds, as GCC uses one only before anything else)."""
    flags = header_flags(cmd)
    key = hashlib.sha256("\0".join(flags + list(first)).encode()).hexdigest()[:16]
    header = folder / f"schema-{key}.h"
    gch = header.with_name(header.name + ".gch")
    if gch.is_file():  # `folder` is the caller's own: a header there was built whole
        return ["-include", str(header)]
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"#include <{h}>" for h in first] + [f'#include "{SCHEMA}"']
    header.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        flags + ["-x", "c++-header", str(header), "-o", str(gch)],
        capture_output=True,
        cwd=cwd,
        timeout=600,
    )
    if proc.returncode != 0:
        gch.unlink(missing_ok=True)
        return []
    return ["-include", str(header)]
