#!/usr/bin/env python3
"""Kept for old instructions: installs TinySeg into an Arduino_TensorFlowLite library by running
`tinyseg tflm install --tflm-dir LIBRARY`, which recognises the library (src/, .cpp sources),
changes its TRANSPOSE_CONV and copies the runtime core, the Nicla Vision storage back-ends and
the TFLM kernels into src/ (docs/runtime.md, "Installing").

    python examples/nicla_vision/install_arduino_library.py ~/Arduino/libraries/Arduino_TensorFlowLite
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tinyseg_plugin.cli import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 1 or args[0].startswith("-"):
        print(
            "usage: install_arduino_library.py LIBRARY_DIR  (same as: tinyseg tflm install --tflm-dir LIBRARY_DIR)",
            file=sys.stderr,
        )
        sys.exit(2)
    sys.exit(main(["tflm", "install", "--tflm-dir", args[0]]))
