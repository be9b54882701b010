"""Model round trips keep everything and run identically; bad files are refused cleanly."""

from __future__ import annotations

import numpy as np
import pytest
import synth
from conftest import SHARED_FIGURES, shared_model

from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.checks.verify import random_inputs
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes, parse_model


@pytest.mark.parametrize("name", sorted(SHARED_FIGURES))
def test_round_trip_keeps_everything_and_runs_identically(name: str) -> None:
    path = shared_model(name)
    original = path.read_bytes()
    model = load_model(path)
    written = model_to_bytes(model)
    again = parse_model(written)
    # Every table survives: same counts, same buffer contents, same metadata and signatures.
    assert len(again.subgraphs) == len(model.subgraphs)
    assert len(again.buffers) == len(model.buffers)
    for a, b in zip(model.buffers, again.buffers):
        assert (a.data is None) == (b.data is None)
        if a.data is not None:
            assert bytes(np.asarray(a.data, np.uint8)) == bytes(np.asarray(b.data, np.uint8))
    assert [m.name for m in model.metadata or []] == [m.name for m in again.metadata or []]
    assert len(model.signatureDefs or []) == len(again.signatureDefs or [])
    for sa, sb in zip(model.subgraphs, again.subgraphs):
        assert len(sa.tensors) == len(sb.tensors) and len(sa.operators) == len(sb.operators)
        for ta, tb in zip(sa.tensors, sb.tensors):
            assert list(ta.shape) == list(tb.shape) and ta.type == tb.type and ta.name == tb.name
            qa, qb = ta.quantization, tb.quantization
            if qa is not None and qa.scale is not None:
                assert list(qa.scale) == list(qb.scale) and list(qa.zeroPoint) == list(qb.zeroPoint)
    # Writing is a fixed point, and buffers are 16-byte aligned.
    assert model_to_bytes(again) == written
    # Same outputs in the real interpreter on several random inputs.
    for seed in range(3):
        x = random_inputs(original, seed)
        for a, b in zip(interpreter.run(original, x), interpreter.run(written, x)):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_buffers_are_16_byte_aligned() -> None:
    data = model_to_bytes(synth.random_unet(3))
    from tinyseg_plugin.ir.schema import fb

    m = fb.Model.GetRootAs(data, 0)
    for i in range(m.BuffersLength()):
        b = m.Buffers(i)
        if b.DataLength():
            pos = b._tab.Vector(b._tab.Offset(4))
            assert pos % 16 == 0


def test_round_trip_of_a_synthetic_model_with_signature_and_metadata() -> None:
    from tinyseg_plugin.ir.schema import fb

    m = synth.random_unet(7)
    md = fb.MetadataT()
    md.name = b"min_runtime_version"
    buf = fb.BufferT()
    buf.data = np.frombuffer(b"1.5.0\0\0\0", np.uint8).copy()
    m.buffers.append(buf)
    md.buffer = len(m.buffers) - 1
    m.metadata = [md]
    sig = fb.SignatureDefT()
    sig.signatureKey = b"serving_default"
    m.signatureDefs = [sig]
    again = parse_model(model_to_bytes(m))
    assert again.metadata[0].name == b"min_runtime_version"
    assert again.signatureDefs[0].signatureKey == b"serving_default"
    assert bytes(np.asarray(again.buffers[md.buffer].data, np.uint8)) == b"1.5.0\0\0\0"


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "too short"),
        (b"hello world, this is text and not a flatbuffer at all", "not a flatbuffer"),
        (b"\x0c\x00\x00\x00XXXX\x00\x00\x00\x00\x00\x00\x00\x00", "wrong file identifier"),
    ],
)
def test_parse_rejects_bad_bytes(data: bytes, message: str) -> None:
    with pytest.raises(TinySegError, match=message):
        parse_model(data)


def test_parse_rejects_truncated_model() -> None:
    data = model_to_bytes(synth.random_unet(1))
    for cut in (len(data) // 3, len(data) // 2, len(data) - 100):
        with pytest.raises(TinySegError):
            parse_model(data[:cut])


# ---------------------------------------------------------------- hostile: a kill while writing

# A tinyseg command that SIGKILLs itself right after the k-th call of os.replace (the renames of
# write_all; k = 0: before the first) or of os.fsync (up to the journal's commit): a power cut there.
_KILLED_AT = """
import os, signal, sys
name, k = sys.argv[1], int(sys.argv[2])
real, calls = getattr(os, name), [0]
def wrapped(*args, **kwargs):
    if calls[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)
    result = real(*args, **kwargs)
    calls[0] += 1
    if calls[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)
    return result
setattr(os, name, wrapped)
if name == "replace":
    os.rename = wrapped
from tinyseg_plugin.cli import main
sys.exit(main(sys.argv[3:]))
"""


def _tinyseg(args: list[str], cwd, env: dict, killed_at: tuple[str, int] | None = None):
    import subprocess
    import sys

    from conftest import ROOT

    code = (
        ["-m", "tinyseg_plugin.cli"]
        if killed_at is None
        else ["-c", _KILLED_AT, *map(str, killed_at)]
    )
    return subprocess.run(
        [sys.executable, *code, *args],
        cwd=cwd,
        env=dict(env, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _outputs(work) -> dict[str, bytes]:
    """Every file under ``work`` except the journal folder's."""
    return {
        str(p.relative_to(work)): p.read_bytes()
        for p in sorted(work.rglob("*"))
        if p.is_file() and "cache" not in p.relative_to(work).parts
    }


def test_a_kill_between_any_two_renames_leaves_one_whole_set(tmp_path, counts) -> None:
    """analyze --json --csv writes 4 files in 2 folders over a previous run's 4. Killed after every
    k-th rename and after every fsync before the journal's commit, the next tinyseg command finds
    the previous set (killed before the commit) or the new one (after), never a mix, and no
    temporary file or journal is left."""
    import os
    import shutil

    env = dict(os.environ, TINYSEG_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TFLM_DIR", None)
    models = {}
    for name, n in (("old", 2), ("new", 3)):  # two different models: two different output sets
        models[name] = tmp_path / f"{name}.tflite"
        models[name].write_bytes(model_to_bytes(synth.chain(n, size=4, channels=2)))
    sets = {}
    for name in models:
        work = tmp_path / f"set-{name}"
        (work / "csv").mkdir(parents=True)
        args = ["analyze", str(models[name]), "--json", "a.json", "--csv", "csv"]
        assert _tinyseg(args, work, env).returncode == 0
        sets[name] = _outputs(work)
    assert sets["old"] != sets["new"] and len(sets["new"]) == 4
    seen = {"old": 0, "new": 0}
    # replace: the journal's rename into place, then the 4 outputs' (k = 0 .. 5)
    kills = [("replace", k) for k in range(6)] + [("fsync", k) for k in range(7)]
    for call, k in kills:
        work = tmp_path / f"kill-{call}-{k}"
        shutil.copytree(tmp_path / "set-old", work)
        args = ["analyze", str(models["new"]), "--json", "a.json", "--csv", "csv"]
        r = _tinyseg(args, work, env, killed_at=(call, k))
        assert r.returncode == -9, (call, k, r.returncode, r.stderr[-500:])
        assert _tinyseg(["boards"], work, env).returncode == 0  # the next run
        found = _outputs(work)
        which = [name for name, files in sets.items() if files == found]
        assert which, f"killed at {call} {k}: a mix of the two sets: {sorted(found)}"
        seen[which[0]] += 1
        assert not list((tmp_path / "cache" / "journal").iterdir()), (call, k)
    # the outputs' renames come after the commit (the new set); the journal's rename and the
    # fsyncs of the temporary files before it
    assert seen == {"new": 4, "old": 9}, seen
    counts(
        f"outputs under kill -9: {len(kills)} kills (before and after each of 5 renames, after each "
        f"fsync up to the commit): {seen['old']} left the previous set, {seen['new']} the new one, "
        "none a mix, a temporary file or a journal"
    )


# ----------------------------------------------------- two runs at once: one's recover, one's write


def _flock_then(before):
    """fcntl.flock that runs ``before(operation)`` once, ahead of the first call it matches."""
    import fcntl

    real, done = fcntl.flock, []

    def flock(fd, operation):
        if not done and before(operation):
            done.append(True)
        return real(fd, operation)

    return flock


def test_a_recover_in_a_live_write_leaves_its_journal_alone(tmp_path, monkeypatch) -> None:
    """Another run's recover, between this write's journal create and its lock, does not take the
    journal (it is not in place yet): the write completes and leaves no journal."""
    from tinyseg_plugin.ir import modelio

    monkeypatch.setenv("TINYSEG_CACHE_DIR", str(tmp_path / "cache"))
    heard: list[list[str]] = []

    def other_run(operation: int) -> bool:
        if operation & modelio.fcntl.LOCK_NB:
            return False
        heard.append(modelio.recover())
        return True

    monkeypatch.setattr(modelio.fcntl, "flock", _flock_then(other_run))
    modelio.write_all([(tmp_path / "a.bin", b"new")])
    assert heard == [[]] and (tmp_path / "a.bin").read_bytes() == b"new"
    assert not list((tmp_path / "cache" / "journal").iterdir())


def test_a_journal_removed_before_recover_locks_it_is_left_alone(tmp_path, monkeypatch) -> None:
    """A run that finishes (removes its journal, unlocks it) between another run's open and lock
    of that journal: the recover skips it instead of failing on a file that is gone."""
    from tinyseg_plugin.ir import modelio

    monkeypatch.setenv("TINYSEG_CACHE_DIR", str(tmp_path / "cache"))
    journal = modelio._open_journal([], [])

    def run_finishes(operation: int) -> bool:
        if not operation & modelio.fcntl.LOCK_NB:
            return False
        modelio._close_journal(*journal)
        return True

    monkeypatch.setattr(modelio.fcntl, "flock", _flock_then(run_finishes))
    assert modelio.recover() == []
    assert not list((tmp_path / "cache" / "journal").iterdir())


def test_only_a_dead_runs_unfinished_journal_is_removed(tmp_path, monkeypatch) -> None:
    """A journal killed before it was in place is removed by the next recover when its process
    is gone; one whose process is alive (it may be about to lock it) stays."""
    import os
    import subprocess
    import sys

    from tinyseg_plugin.ir import modelio

    monkeypatch.setenv("TINYSEG_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "journal"
    folder.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    gone = folder / f"{dead}-00{modelio.JOURNAL_SUFFIX}{modelio.PART_SUFFIX}"
    live = folder / f"{os.getpid()}-01{modelio.JOURNAL_SUFFIX}{modelio.PART_SUFFIX}"
    for part in (gone, live):
        part.write_bytes(b"")
    assert modelio.recover() == []
    assert sorted(folder.iterdir()) == [live]
