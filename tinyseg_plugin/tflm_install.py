"""``tinyseg tflm install``: put TinySeg's runtime into a TFLM checkout.

What it does to the checkout (TFLM 90b983c; docs/runtime.md):
- copies ``tflm_ops/kernels`` and the portable part of ``tflm_ops/core`` into
  ``tensorflow/lite/micro/kernels/tinyseg/`` (plus a stamp file naming what was copied);
- applies ``patches/tflm/*.patch``: the make build and test targets, the marker-driven
  scratch narrowing of TRANSPOSE_CONV (reference and CMSIS-NN), and an external context
  for FakeMicroContext so kernel tests can attach a runtime.

Why it is careful: a half-patched TFLM tree fails to build in confusing ways. So every
patch is checked before anything is written (exact context, no fuzz; a patch whose
changes are already there counts as applied), all new file contents are computed in
memory, the copy is staged next to its destination and renamed into place, and any
failure while writing restores every file already written. A second run finds
everything in place and changes nothing.

The patches are plain unified diffs (``git apply`` accepts them too); they are applied
here in Python so that the check and the apply are the same code and need no tool.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .errors import TinySegError

TFLM_COMMIT = "90b983c"
INSTALL_DIR = "tensorflow/lite/micro/kernels/tinyseg"
STAMP = "TINYSEG_INSTALLED"
STAMP_FORMAT = "tinyseg-tflm-install 1"
RUNTIME_ENV = "TINYSEG_RUNTIME_DIR"

# Files a TFLM checkout at (or near) 90b983c has and our patches and kernels rely on.
EXPECTED_FILES = (
    "tensorflow/lite/micro/tools/make/Makefile",
    "tensorflow/lite/micro/kernels/Makefile.inc",
    "tensorflow/lite/micro/kernels/transpose_conv.cc",
    "tensorflow/lite/micro/kernels/cmsis_nn/transpose_conv.cc",
    "tensorflow/lite/micro/kernels/kernel_util.h",
    "tensorflow/lite/micro/kernels/kernel_runner.h",
    "tensorflow/lite/micro/fake_micro_context.cc",
    "tensorflow/lite/micro/micro_common.h",
    "tensorflow/lite/micro/micro_interpreter.h",
    "tensorflow/lite/micro/micro_mutable_op_resolver.h",
)


# ---------------------------------------------------------------- where our files are


@dataclass(frozen=True)
class Sources:
    """The runtime sources and the patches this package installs."""

    tflm_ops: Path
    patches: Path

    def patch_files(self) -> list[Path]:
        return sorted(self.patches.glob("*.patch"))

    def copy_plan(self) -> list[tuple[str, Path]]:
        """(destination relative to the install dir, source file), sorted."""
        kernels = self.tflm_ops / "kernels"
        core = self.tflm_ops / "core"
        plan: list[tuple[str, Path]] = []
        for pattern in ("*.h", "*.cc", "*.inc"):
            plan += [(p.name, p) for p in kernels.glob(pattern)]
        plan += [(f"tests/{p.name}", p) for p in (kernels / "tests").glob("*") if p.is_file()]
        plan += [(f"core/include/tinyseg/{p.name}", p) for p in (core / "include" / "tinyseg").glob("*.h")]
        plan += [(f"core/src/{p.name}", p) for p in (core / "src").glob("*.cc")]
        return sorted(plan)


def _usable(root: Path) -> Sources | None:
    s = Sources(root / "tflm_ops", root / "patches" / "tflm")
    if (s.tflm_ops / "kernels" / "tinyseg_ops.h").is_file() and (s.tflm_ops / "core" / "src").is_dir() \
            and s.patch_files():
        return s
    return None


def find_sources() -> Sources:
    """$TINYSEG_RUNTIME_DIR, then the package's bundled copy (``_runtime``), then the source tree."""
    here = Path(__file__).resolve().parent
    candidates = []
    if os.environ.get(RUNTIME_ENV):
        candidates.append(Path(os.environ[RUNTIME_ENV]))
    candidates += [here / "_runtime", here.parent]
    for c in candidates:
        s = _usable(c)
        if s is not None:
            return s
    raise TinySegError(
        f"TinySeg runtime sources not found (looked for tflm_ops/ and patches/tflm/ in "
        f"{', '.join(str(c) for c in candidates)}); set {RUNTIME_ENV}"
    )


# ---------------------------------------------------------------- unified diffs


@dataclass
class Hunk:
    old_start: int  # 1-based first line of the old side (for an empty side: the line before)
    new_start: int
    old: list[str] = field(default_factory=list)  # context and removed lines
    new: list[str] = field(default_factory=list)  # context and added lines


@dataclass
class FilePatch:
    path: str  # relative to the checkout
    hunks: list[Hunk] = field(default_factory=list)


def _range(text: str) -> tuple[int, int]:
    start, _, count = text[1:].partition(",")
    return int(start), int(count) if count else 1


def parse_patch(text: str, name: str) -> list[FilePatch]:
    """The file patches of a unified diff (git or plain). Hunk bodies are read by the
    line counts of their headers; anything between files (descriptions, git's
    ``diff``/``index`` lines) is skipped."""
    files: list[FilePatch] = []
    lines = text.splitlines(keepends=True)
    i = 0
    cur: FilePatch | None = None
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            target = lines[i + 1][4:].rstrip("\r\n").split("\t")[0]
            if target == "/dev/null":
                raise TinySegError(f"{name}: deletes a file, which the installer does not do")
            cur = FilePatch(target[2:] if target.startswith(("a/", "b/")) else target)
            files.append(cur)
            i += 2
            continue
        if line.startswith("@@ "):
            if cur is None:
                raise TinySegError(f"{name}: hunk before any file header")
            try:
                parts = line.split()
                (old_start, old_n), (new_start, new_n) = _range(parts[1]), _range(parts[2])
            except (IndexError, ValueError):
                raise TinySegError(f"{name}: malformed hunk header {line.strip()!r}") from None
            hunk = Hunk(old_start, new_start)
            cur.hunks.append(hunk)
            i += 1
            while i < len(lines) and (len(hunk.old) < old_n or len(hunk.new) < new_n
                                      or lines[i].startswith("\\")):
                body = lines[i]
                tag, content = body[:1], body[1:]
                if tag == " " or body in ("\n", "\r\n"):
                    content = content if tag == " " else body
                    hunk.old.append(content)
                    hunk.new.append(content)
                elif tag == "-":
                    hunk.old.append(content)
                elif tag == "+":
                    hunk.new.append(content)
                elif tag == "\\":  # "\ No newline at end of file": the line before has none
                    last = lines[i - 1][:1]
                    for side, tags in ((hunk.old, " -"), (hunk.new, " +")):
                        if last in tags and side and side[-1].endswith("\n"):
                            side[-1] = side[-1][:-1]
                else:
                    raise TinySegError(f"{name}: hunk of {cur.path} is shorter than its header says")
                i += 1
            if len(hunk.old) != old_n or len(hunk.new) != new_n:
                raise TinySegError(f"{name}: hunk of {cur.path} is shorter than its header says")
            continue
        i += 1
    if not files or any(not f.hunks for f in files):
        raise TinySegError(f"{name}: not a unified diff with hunks")
    return files


def apply_hunks(lines: list[str], hunks: list[Hunk], reverse: bool = False) -> list[str] | None:
    """Apply hunks exactly (context must match; the position may shift, as patch allows); None if not."""
    out: list[str] = []
    pos = 0  # next unconsumed line of `lines`
    delta = 0
    for h in hunks:
        find, put = (h.new, h.old) if reverse else (h.old, h.new)
        start = h.new_start if reverse else h.old_start
        want = max((start - 1 if find else start) + delta, pos)
        at = _locate(lines, find, want, pos)
        if at is None:
            return None
        out += lines[pos:at] + put
        pos = at + len(find)
        delta += len(put) - len(find)
    return out + lines[pos:]


def _locate(lines: list[str], block: list[str], want: int, lo: int) -> int | None:
    """Index >= lo where `block` matches, nearest to `want`."""
    n = len(block)
    for d in range(0, len(lines) + 1):
        for at in (want - d, want + d) if d else (want,):
            if lo <= at <= len(lines) - n and lines[at:at + n] == block:
                return at
        if want - d < lo and want + d > len(lines) - n:
            break
    return None


# ---------------------------------------------------------------- state of a checkout


@dataclass
class PatchState:
    name: str
    state: str  # "pending", "applied"
    new_texts: dict[str, str]  # path -> patched content (pending only)


def _read(root: Path, rel: str, working: dict[str, str]) -> str:
    if rel in working:
        return working[rel]
    try:
        return (root / rel).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TinySegError(f"{root} has no {rel}, which a patch changes") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TinySegError(f"cannot read {root / rel}: {exc}") from None


def check_patch(root: Path, patch: Path, working: dict[str, str]) -> PatchState:
    """Whether `patch` is already in the tree, applies cleanly, or does neither (error).
    `working` holds the contents earlier patches of the series would give; it is updated."""
    try:
        text = patch.read_text(encoding="utf-8")
    except OSError as exc:
        raise TinySegError(f"cannot read {patch}: {exc}") from None
    states: list[str] = []
    new_texts: dict[str, str] = {}
    for fp in parse_patch(text, patch.name):
        lines = _read(root, fp.path, working).splitlines(keepends=True)
        # Applied first: a hunk that appends at the end of a file would also apply again.
        if apply_hunks(lines, fp.hunks, reverse=True) is not None:
            states.append("applied")
        elif (forward := apply_hunks(lines, fp.hunks)) is not None:
            states.append("pending")
            new_texts[fp.path] = "".join(forward)
        else:
            raise TinySegError(
                f"patch {patch.name} does not apply to {fp.path} in {root} "
                f"(made for TFLM {TFLM_COMMIT}; the file differs)"
            )
    if len(set(states)) > 1:
        raise TinySegError(f"patch {patch.name} is only partly applied in {root}; restore its files (git checkout) and retry")
    working.update(new_texts)
    return PatchState(patch.name, states[0], new_texts if states[0] == "pending" else {})


def sources_digest(sources: Sources) -> str:
    h = hashlib.sha256()
    for rel, src in sources.copy_plan():
        h.update(rel.encode() + b"\0" + src.read_bytes() + b"\0")
    for p in sources.patch_files():
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def stamp_text(digest: str) -> str:
    return f"{STAMP_FORMAT}\ntflm {TFLM_COMMIT}\ndigest {digest}\n"


def copy_state(root: Path, sources: Sources, digest: str) -> str:
    """"missing", "current" or "outdated" (our stamp, other content). A directory we did not write is an error."""
    dest = root / INSTALL_DIR
    if not dest.exists():
        return "missing"
    stamp = dest / STAMP
    if not dest.is_dir() or not stamp.is_file():
        raise TinySegError(f"{dest} exists but was not written by tinyseg (no {STAMP}); move it away and retry")
    try:
        current = stamp.read_text(encoding="utf-8") == stamp_text(digest) and all(
            (dest / rel).is_file() and (dest / rel).read_bytes() == src.read_bytes()
            for rel, src in sources.copy_plan()
        )
    except OSError as exc:
        raise TinySegError(f"cannot read {dest}: {exc}") from None
    return "current" if current else "outdated"


def _git_head(root: Path) -> str | None:
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=9", "HEAD"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def check_checkout(tflm_dir: str) -> Path:
    root = Path(tflm_dir).expanduser()
    if not root.exists():
        raise TinySegError(f"{tflm_dir}: no such directory")
    if not root.is_dir():
        raise TinySegError(f"{tflm_dir}: not a directory")
    missing = [f for f in EXPECTED_FILES if not (root / f).is_file()]
    if missing:
        raise TinySegError(f"{tflm_dir} is not a TFLM checkout (no {missing[0]})")
    return root.resolve()


# ---------------------------------------------------------------- writing, all or nothing


def _write_all(root: Path, sources: Sources, digest: str, texts: dict[str, str], replace_copy: bool) -> None:
    """Stage the copy, write the patched files, swap the copy in; on failure undo everything."""
    dest = root / INSTALL_DIR
    parent = dest.parent
    staged = Path(tempfile.mkdtemp(prefix=".tinyseg-staged-", dir=parent))
    old: Path | None = None
    written: list[tuple[Path, bytes, int]] = []  # (file, original bytes, mode)
    try:
        for rel, src in sources.copy_plan():
            target = staged / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
        (staged / STAMP).write_text(stamp_text(digest), encoding="utf-8")
        for rel, text in sorted(texts.items()):
            path = root / rel
            original = path.read_bytes()
            mode = path.stat().st_mode
            tmp = path.with_name(f".{path.name}.tinyseg-tmp")
            tmp.write_text(text, encoding="utf-8")
            os.chmod(tmp, mode & 0o7777)
            os.replace(tmp, path)
            written.append((path, original, mode))
        if replace_copy:
            if dest.exists():
                old = Path(tempfile.mkdtemp(prefix=".tinyseg-old-", dir=parent))
                os.rmdir(old)
                os.replace(dest, old)
            os.replace(staged, dest)
    except OSError as exc:
        for path, original, mode in reversed(written):
            try:
                tmp = path.with_name(f".{path.name}.tinyseg-tmp")
                tmp.write_bytes(original)
                os.chmod(tmp, mode & 0o7777)
                os.replace(tmp, path)
            except OSError:
                pass
        for rel in texts:  # a write that failed half-way
            path = root / rel
            path.with_name(f".{path.name}.tinyseg-tmp").unlink(missing_ok=True)
        if old is not None and not dest.exists():
            os.replace(old, dest)
            old = None
        shutil.rmtree(staged, ignore_errors=True)
        raise TinySegError(f"installing into {root} failed ({exc}); the checkout was restored") from None
    shutil.rmtree(staged, ignore_errors=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- the command


def install(tflm_dir: str, check_only: bool = False) -> Iterable[str]:
    """Install (or with check_only, only check) TinySeg in a TFLM checkout; returns the lines to print."""
    root = check_checkout(tflm_dir)
    sources = find_sources()
    lines = []
    head = _git_head(root)
    lines.append(f"TFLM checkout {root}" + (f" (git {head})" if head else ""))
    if head and not head.startswith(TFLM_COMMIT):
        lines.append(f"note: patches were made for TFLM {TFLM_COMMIT}; checking that they apply to {head}")
    working: dict[str, str] = {}
    states = [check_patch(root, p, working) for p in sources.patch_files()]
    digest = sources_digest(sources)
    copied = copy_state(root, sources, digest)
    pending = [s for s in states if s.state == "pending"]
    if not pending and copied == "current":
        return lines + [f"already installed in {root} (nothing changed)"]

    for s in states:
        if s.state == "applied":
            lines.append(f"{s.name}: already applied")
        else:
            lines.append(f"{s.name}: {'applies' if check_only else 'applied'} ({', '.join(sorted(s.new_texts))})")
    verb = {"missing": "copy", "outdated": "update", "current": "keep"}[copied]
    n = len(sources.copy_plan())
    if check_only:
        lines.append(f"{INSTALL_DIR}: would {verb} {n} files")
        lines.append("check passed: nothing was changed")
        return lines
    _write_all(root, sources, digest, working, replace_copy=copied != "current")
    done = {"copy": "copied", "update": "updated", "keep": "kept"}[verb]
    lines.append(f"{INSTALL_DIR}: {done} {n} files")
    lines.append(f"installed TinySeg into {root}")
    lines.append("build: make -f tensorflow/lite/micro/tools/make/Makefile microlite; "
                 "kernel tests: make -f tensorflow/lite/micro/tools/make/Makefile test_kernel_tinyseg_<name>_test")
    return lines
