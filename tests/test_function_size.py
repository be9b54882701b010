"""scripts/function_size.py: the StreamChain kernel's files pass it, and it fails on a function
over the limit and on a dispatcher over its line count (so the check can fail)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "function_size.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_stream_kernel_within_limits() -> None:
    p = run()
    assert p.returncode == 0, p.stdout


def test_long_function_and_dispatcher_refused(tmp_path: Path) -> None:
    body = "".join(f"  x += {i};\n" for i in range(80))
    src = (
        "// a comment with a brace {\nnamespace n {\n"
        f"int Long(int x) {{\n{body}  return x;\n}}\n"
        'int Short() { const char* s = "}"; return s[0]; }\n}  // namespace n\n'
    )
    f = tmp_path / "tinyseg_stream_x.cc"
    f.write_text(src)
    p = run(str(f))
    assert p.returncode == 1
    assert "tinyseg_stream_x.cc:3: Long is 83 lines (limit 80)" in p.stdout
    assert "Short" not in p.stdout
    d = tmp_path / "tinyseg_stream.cc"
    d.write_text("int F() { return 0; }\n" + "// filler\n" * 300)
    p = run(str(d))
    assert p.returncode == 1 and "the dispatcher is 301 lines (limit 300)" in p.stdout
    assert run(str(tmp_path / "missing.cc")).returncode == 2
