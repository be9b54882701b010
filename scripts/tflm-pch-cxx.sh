#!/usr/bin/env bash
# The suite's C++ compiler in front of g++ and arm-none-eabi-g++ (scripts/test.sh links it under
# those names into a folder first on PATH): a TFLM source compiled by TFLM's own make gets a
# precompiled header of tensorflow/lite/schema/schema_generated.h, which with the flatbuffers and
# standard headers behind it is most of what the compiler reads for each source (a kernel took
# 1.2 s instead of 3.3 s: kernels/add_n.cc, conv.cc and mul.cc, g++ 12, TFLM's -O2 host flags).
# Every other compile goes through unchanged. Then through ccache when there is one.
#
# Why it is safe: the objects have the plain compile's sections, byte for byte (one of TFLM's
# sources, detection_postprocess.cc, in another order; tests/test_tflm_pch.py compares them); the
# header is one TFLM never edits; and a precompiled header is used only where its key matches: the
# compiler, every flag of the compile and the preprocessed text of the header in the tree at hand.
# A source counts as TFLM's when the compile is `-c` of one .cc file with `-I.` and
# `-DTF_LITE_STATIC_MEMORY`, run at the root of a tree with TFLM's Makefile and schema, with no flag
# this script does not know how to drop (-M*, -x, -include, -E, -S). If the header cannot be
# precompiled, the source compiles as it would have.
#
# Environment: TINYSEG_PCH_DIR (where the headers go, about 250 MB each; unset: no precompiled
# headers), TINYSEG_PCH_LOG (a file to which each compile that uses one adds "KEY SOURCE").
set -uo pipefail

name=$(basename "$0")
here=$(cd "$(dirname "$0")" && pwd)
# Drop this folder from PATH so the name below is the real compiler (or ccache's link to it).
path=":$PATH:"
path=${path//":$here:"/":"}
path=${path#:}
export PATH=${path%:}
launch=()
command -v ccache >/dev/null 2>&1 && launch=(ccache)

plain() { exec "${launch[@]}" "$name" "$@"; }

schema=tensorflow/lite/schema/schema_generated.h
[ -n "${TINYSEG_PCH_DIR:-}" ] && [ -f "$schema" ] &&
  [ -f tensorflow/lite/micro/tools/make/Makefile ] || plain "$@"

flags=()
src=
compile=0 dot=0 tflm=0
skip_next=0
for a in "$@"; do
  if [ "$skip_next" = 1 ]; then
    skip_next=0
    continue
  fi
  case "$a" in
    -c) compile=1 ;;
    -o) skip_next=1 ;;
    -I.) dot=1 flags+=("$a") ;;
    -DTF_LITE_STATIC_MEMORY) tflm=1 flags+=("$a") ;;
    -M* | -x | -x* | -include | -E | -S | -o*) plain "$@" ;;
    -*) flags+=("$a") ;;
    *.cc)
      [ -z "$src" ] || plain "$@"
      src=$a
      ;;
    *) plain "$@" ;;
  esac
done
[ "$compile" = 1 ] && [ "$dot" = 1 ] && [ "$tflm" = 1 ] && [ -n "$src" ] || plain "$@"

# The key: the compiler, the flags but -I and the -D of macros no file of the header names, and the
# header's preprocessed text with all of them. So builds that differ only in those flags (the
# reference and the CMSIS-NN kernels: CMSIS_NN, ARM_NN_ENABLE_F16, the genfiles and cmsis folders)
# make one header, not two. (ccache does not share their objects, as it would without a header:
# with one it hashes every -D and -I flag; the header still saves more than that cost.) The header
# is made without those -D: the compiler itself refuses a header made with a macro the source lacks,
# or without one it defines that the header names, and then reads the text. Working this out costs
# two preprocessor runs, remembered per tree, flags and schema file (its size and time).
mkdir -p "$TINYSEG_PCH_DIR/memo" 2>/dev/null || plain "$@"
compiler=$(command -v "$name") || plain "$@"
memo_id=$(printf '%s\n' "$compiler" "$PWD" "$(stat -c '%s %Y' "$schema" "$compiler")" "${flags[@]}" |
  sha256sum | cut -c1-32)
memo="$TINYSEG_PCH_DIR/memo/$memo_id"
unused=()
if [ -s "$memo" ]; then
  { read -r key && read -r -a unused; } <"$memo" || plain "$@"
else
  include=$(printf '#include "%s"\n' "$schema")
  deps=$("$name" "${flags[@]}" -M -x c++ - <<<"$include" 2>/dev/null) || plain "$@"
  files=()
  for f in ${deps//\\/}; do [ -f "$f" ] && files+=("$f"); done
  macros=()
  for f in "${flags[@]}"; do
    case "$f" in -D?*) m=${f#-D} && macros+=("${m%%=*}") ;; esac
  done
  named=" "
  if [ "${#macros[@]}" -gt 0 ]; then
    named=" $(grep -ohwF "${macros[@]/#/-e}" "${files[@]}" 2>/dev/null | sort -u | tr '\n' ' ')"
  fi
  keyed=()
  for f in "${flags[@]}"; do
    case "$f" in
      -I*) ;;
      -D?*)
        m=${f#-D} && m=${m%%=*}
        if [[ "$named" == *" $m "* ]]; then keyed+=("$f"); else unused+=("$m"); fi
        ;;
      *) keyed+=("$f") ;;
    esac
  done
  text=$("$name" "${flags[@]}" -E -x c++ - <<<"$include" 2>/dev/null | sha256sum) || plain "$@"
  key=$( (
    "$compiler" --version | head -1
    printf '%s\n' "${keyed[@]}" "$text"
  ) | sha256sum | cut -c1-32)
  printf '%s\n%s\n' "$key" "${unused[*]}" >"$memo.$$" && mv -f "$memo.$$" "$memo"
fi
made=()  # the flags the header is made with: these but the -D of unused macros
for f in "${flags[@]}"; do
  case "$f" in
    -D?*)
      m=${f#-D} && m=${m%%=*}
      [[ " ${unused[*]} " == *" $m "* ]] || made+=("$f")
      ;;
    *) made+=("$f") ;;
  esac
done

dir="$TINYSEG_PCH_DIR/$key"
header="$dir/tflm_schema.h"
if [ ! -f "$header.gch" ]; then
  [ -f "$dir/failed" ] && plain "$@"
  mkdir -p "$dir" || plain "$@"
  # Not on a nearly full disk: a header takes about 250 MB while the build goes on writing.
  free_kb=$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')
  [ "${free_kb:-0}" -gt 2000000 ] || plain "$@"
  (
    flock 9
    if [ ! -f "$header.gch" ] && [ ! -f "$dir/failed" ]; then
      printf '#include "%s"\n' "$schema" >"$header"
      if "$name" "${made[@]}" -x c++-header "$header" -o "$header.gch.$$" >"$dir/build.log" 2>&1; then
        mv -f "$header.gch.$$" "$header.gch"
      else
        rm -f "$header.gch.$$"
        touch "$dir/failed"
      fi
    fi
  ) 9>"$dir/lock"
  [ -f "$header.gch" ] || plain "$@"
fi

# ccache caches such compiles only with these (its manual, "Precompiled headers"); the header's
# hash goes into the key of every object, and CCACHE_INODECACHE spares rehashing it each time.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:+$CCACHE_SLOPPINESS,}pch_defines,time_macros"
export CCACHE_INODECACHE=1
[ -z "${TINYSEG_PCH_LOG:-}" ] || printf '%s %s\n' "$key" "$src" >>"$TINYSEG_PCH_LOG"
exec "${launch[@]}" "$name" -include "$header" -fpch-preprocess "$@"
