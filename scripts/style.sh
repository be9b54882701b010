#!/usr/bin/env bash
# The code style, enforced: ruff (lint, and format at 100 columns; pyproject.toml) over the Python
# files and clang-format (.clang-format, 100 columns) over the C++ ones git tracks, and
# scripts/function_size.py over the TinySeg kernels (no function over 80 lines, the dispatcher
# under 300). Generated files are left as their generator writes them.
#   bash scripts/style.sh          check: lists what is off, exits 1 if anything is
#   bash scripts/style.sh --fix    rewrite the files in place
# Environment: PYTHON_BIN (default .venv/bin/python; ruff comes with the [test] extra).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
py="${PYTHON_BIN:-$repo/.venv/bin/python}"
fix=0
[ "${1:-}" = "--fix" ] && fix=1

# The custom-operator contract header is generated from tinyseg_plugin (tests/test_contract.py).
generated='^tflm_ops/kernels/tinyseg_contract\.h$'
mapfile -t cxx < <(git ls-files '*.cc' '*.h' '*.cpp' '*.ino' | grep -v '^tinyseg_plugin/_runtime/' | grep -Ev "$generated")

rc=0
if [ "$fix" = 1 ]; then
  "$py" -m ruff check --fix --quiet . || rc=1
  "$py" -m ruff format --quiet . || rc=1
  clang-format -i "${cxx[@]}" || rc=1
  exit $rc
fi
"$py" -m ruff check --quiet . || { echo "style: ruff check failed (bash scripts/style.sh --fix fixes most)"; rc=1; }
"$py" -m ruff format --check --quiet . || { echo "style: files ruff would reformat (bash scripts/style.sh --fix)"; rc=1; }
if command -v clang-format >/dev/null 2>&1; then
  clang-format --dry-run -Werror "${cxx[@]}" 2>&1 | grep -E '^[^ ].*: (error|warning):' | cut -d: -f1 | sort -u \
    | sed 's/^/style: clang-format would change /'
  clang-format --dry-run -Werror "${cxx[@]}" >/dev/null 2>&1 || rc=1
else
  echo "style: clang-format not found (scripts/install-native-deps.sh installs it)"
  rc=1
fi
# The StreamChain kernel stays a table of small stage families (scripts/function_size.py).
"$py" scripts/function_size.py || { echo "style: a StreamChain kernel function or its dispatcher is too long"; rc=1; }
[ "$rc" = 0 ] && echo "style: ruff, clang-format and function sizes clean (${#cxx[@]} C++ files)"
exit $rc
