"""Hostile board files, sizes, rates and StreamChain body shapes through the command line.

A generated family of board maps (every number at 400 and 5,000 digits, 1e308, inf, NaN and
negative; nesting 5,000 and 100,000 deep in TOML and JSON; wrong types everywhere; missing
fields; names with control characters, ANSI escapes, newlines and a megabyte of text; duplicate
regions) and of files that are no board file (a 1 GB sparse file, a directory, a FIFO, a symlink
to /dev/zero) goes through `tinyseg analyze --board` and `tinyseg optimize --board`. Each must be
refused with exit 2 and one line on stderr, with no traceback, no raw control character and the
bad name escaped; the files that could block run in a child process under a timeout. The same for
`--target`, `--max-io-bytes`, `--rate`, `--runs` and `--time-limit`, and for StreamChain body
shapes of inf, NaN, negative and 2^62. The counts go to the run's summary (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import hostile_models
import pytest
import synth
from conftest import ROOT, TINY_UNET

from tinyseg_plugin import cli
from tinyseg_plugin.ir.modelio import model_to_bytes

GOOD = {
    "name": "mine",
    "region": [
        {"name": "sram", "kind": "ram", "capacity": 262144, "read_bandwidth": 1e9,
         "write_bandwidth": 1e9},
        {"name": "nor", "kind": "flash", "capacity": 1048576, "read_bandwidth": 2e7,
         "write_bandwidth": 5e6, "page_size": 256, "sector_size": 4096,
         "page_program_time": 0.0007, "sector_erase_time": 0.05, "endurance": 100000},
    ],
}  # fmt: skip
NUMBERS = ("capacity", "used", "read_bandwidth", "write_bandwidth", "page_size", "sector_size",
           "page_program_time", "sector_erase_time", "endurance", "read_command_time",
           "program_command_time")  # fmt: skip


class Raw(str):
    """Text written into the file as it is (a 5,000-digit number no serializer writes)."""


HOSTILE_VALUES = {
    "400 digits": Raw("9" * 400),
    "5000 digits": Raw("9" * 5000),
    "1e308": 1e308,
    "-1e308": -1e308,
    "inf": float("inf"),
    "nan": float("nan"),
    "-1": -1,
    "a 400-digit string": "9" * 400,
    "1e9999KB": "1e9999KB",
    "true": True,
    "a list": [1],
    "a table": {"a": 1},
}
NAMES = {
    "newline": "a\nb",
    "ANSI escape": "\x1b[31mred\x1b[0m",
    "NUL": "x\x00y",
    "bidi override": "\u202eevil",
    "100,000 characters": "n" * 100_000,
    "1 MB": "m" * (1 << 20),
    "empty": "",
    "a number": 5,
    "a list": ["a"],
}


def _literal(v: object, toml: bool) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, float) and v != v:
        return "nan" if toml else "NaN"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return ("" if v > 0 else "-") + ("inf" if toml else "Infinity")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x, toml) for x in v) + "]"
    if isinstance(v, dict):
        sep = " = " if toml else ": "
        keys = (lambda k: k) if toml else json.dumps
        return "{" + ", ".join(f"{keys(k)}{sep}{_literal(x, toml)}" for k, x in v.items()) + "}"
    return json.dumps(v) if isinstance(v, str) else repr(v)


def _write(d: object, path: Path) -> Path:
    """``d`` as TOML or JSON (by the suffix), hostile values written as they are."""
    toml = path.suffix == ".toml"
    if not toml or not isinstance(d, dict):
        path.write_text(_literal(d, False), encoding="utf-8")
        return path
    lines = [f"{k} = {_literal(v, True)}" for k, v in d.items() if k != "region"]
    regions = d.get("region", [])
    if isinstance(regions, list) and all(isinstance(r, dict) for r in regions):
        for r in regions:
            lines += ["[[region]]"] + [f"{k} = {_literal(v, True)}" for k, v in r.items()]
    elif "region" in d:
        lines.append(f"region = {_literal(regions, True)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _changed(edit) -> dict:
    d = json.loads(json.dumps(GOOD))
    edit(d)
    return d


def _set(where: str, key: str, value: object):
    def edit(d: dict) -> None:
        target = d if where == "board" else d["region"][1 if where == "flash" else 0]
        if value is _DROP:
            target.pop(key, None)
        else:
            target[key] = value

    return edit


_DROP = object()


def board_maps() -> dict[str, object]:
    """The generated family: name -> the map (a dict, or text written as it is)."""
    maps: dict[str, object] = {}
    for key in NUMBERS:
        for label, value in HOSTILE_VALUES.items():
            maps[f"{key} {label}"] = _changed(_set("flash", key, value))
    for label, value in HOSTILE_VALUES.items():
        maps[f"clock_hz {label}"] = _changed(_set("board", "clock_hz", value))
    for label, value in NAMES.items():
        maps[f"region name {label}"] = _changed(_set("ram", "name", value))
        maps[f"board name {label}"] = _changed(_set("board", "name", value))
    for key in ("name", "kind", "capacity", "read_bandwidth", "write_bandwidth"):
        maps[f"region without {key}"] = _changed(_set("ram", key, _DROP))
    for key in ("page_size", "sector_size", "page_program_time", "sector_erase_time", "endurance"):
        maps[f"flash without {key}"] = _changed(_set("flash", key, _DROP))
    for key, value in (("kind", 5), ("arena", "yes"), ("used_by", 7), ("note", ["n"]),
                       ("kind", "\x1b[2Jram"), ("dma", "no"), ("dma", 0), ("dma", [True])):  # fmt: skip
        maps[f"region {key} {value!r}"] = _changed(_set("ram", key, value))
    for value in ("yes", 1, 0.0, {"core": "m4"}, "true"):
        maps[f"board erase_worker {value!r}"] = _changed(_set("board", "erase_worker", value))
    for key, value in (("spill_region", 5), ("spill_region", "\x1b[31mnor"), ("note", 5),
                       ("region", "x"), ("region", [1]), ("region", []), ("region", {"a": 1}),
                       ("\x1b[31mkey\n", 1)):  # fmt: skip
        maps[f"board {key!r} {value!r}"] = _changed(_set("board", key, value))
    maps["duplicate regions"] = _changed(lambda d: d["region"].append(dict(d["region"][0])))
    maps["two arenas"] = _changed(
        lambda d: (
            d["region"].extend([dict(d["region"][0], name="b", arena=True)])
            or d["region"][0].update(arena=True)
        )
    )
    maps["100 regions"] = _changed(
        lambda d: d.update(region=[dict(d["region"][0], name=f"r{k}") for k in range(100)])
    )
    maps["no ram"] = _changed(lambda d: d["region"].pop(0))
    maps["used over capacity"] = _changed(_set("ram", "used", 1 << 40))
    maps["a list at the top"] = [GOOD]
    return maps


def _nested(depth: int, toml: bool) -> str:
    inner = "[" * depth + "]" * depth
    return f"x = {inner}\n" if toml else inner


TEXTS = {  # name -> (suffix, text)
    "JSON nested 5,000 deep": (".json", _nested(5000, False)),
    "JSON nested 100,000 deep": (".json", _nested(100_000, False)),
    "JSON objects 5,000 deep": (".json", '{"a":' * 5000 + "1" + "}" * 5000),
    "TOML arrays 5,000 deep": (".toml", _nested(5000, True)),
    "TOML arrays 100,000 deep": (".toml", _nested(100_000, True)),
    "TOML inline tables 5,000 deep": (".toml", "x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n"),
    "TOML dotted key 5,000 deep": (".toml", "name." + ".".join(["a"] * 5000) + " = 1\n"),
    "TOML table header 5,000 deep": (".toml", "[" + ".".join(["a"] * 5000) + "]\n"),
    "JSON 5,000-digit integer": (".json", '{"clock_hz": ' + "9" * 5000 + "}"),
    "TOML 5,000-digit integer": (".toml", "clock_hz = " + "9" * 5000 + "\n"),
    "empty JSON": (".json", ""),
    "empty TOML region": (".toml", "[[region]]\n"),
    "not UTF-8": (".json", b'{"name": "\xff"}'),
}


SAYS = {  # what the one line says of each file that is no board file
    "a 1 GB sparse file": "has 1,073,741,824 B: a board file may have at most 1,048,576 B",
    "a directory": "is a directory",
    "a FIFO": "is a FIFO",
    "a symlink to /dev/zero": "is a character device",
    "a symlink loop": "cannot read board file",
    "a YAML file": "a board file ends in .toml or .json",
}


def _files(d: Path) -> dict[str, Path]:
    """Paths that are no board file: each must be refused without being read whole or blocking."""
    out = {}
    out["a 1 GB sparse file"] = d / "big.json"
    with open(out["a 1 GB sparse file"], "wb") as f:
        f.truncate(1 << 30)
    out["a directory"] = d / "dir.json"
    out["a directory"].mkdir()
    out["a FIFO"] = d / "fifo.toml"
    os.mkfifo(out["a FIFO"])
    out["a symlink to /dev/zero"] = d / "zero.json"
    out["a symlink to /dev/zero"].symlink_to("/dev/zero")
    out["a symlink loop"] = d / "loop.json"
    out["a symlink loop"].symlink_to(d / "loop.json")
    out["a YAML file"] = d / "b.yaml"
    out["a YAML file"].write_text("name: x\n")
    return out


_TALLY: dict[str, float] = {"maps": 0, "runs": 0, "internal": 0, "slowest": 0.0}


@pytest.fixture(scope="module", autouse=True)
def _tally_line(counts):
    yield
    if not _TALLY["runs"]:
        return
    counts(
        f"hostile boards: {_TALLY['maps']:.0f} board maps and files, {_TALLY['runs']:.0f} runs of "
        f"analyze and optimize --board, each exit 2 with one escaped line; "
        f"{_TALLY['internal']:.0f} internal errors, 0 hangs; slowest {_TALLY['slowest']:.2f} s"
    )


def _tally(rc: int, err: str, start: float) -> float:
    """Count one run of a board map; its seconds."""
    took = time.monotonic() - start
    _TALLY["runs"] += 1
    _TALLY["slowest"] = max(_TALLY["slowest"], took)
    _TALLY["internal"] += rc == 1 or "Traceback" in err or "internal error" in err
    return took


def _problem(rc: int, err: str, took: float) -> str | None:
    """What breaks the refusal contract (None: nothing): exit 2, one line, printable, short."""
    if rc != 2 or err.count("\n") != 1 or not err.startswith("tinyseg: error: "):
        return f"exit {rc}: {err[-300:]!r}"
    if not err[:-1].isprintable():
        return f"a control character reached the terminal: {err[:300]!r}"
    if len(err) > 2100 or took > 30:
        return f"{len(err)} characters in {took:.1f} s"
    return None


def _both_commands(board: Path, out: Path, capsys) -> list[tuple[str, str]]:
    """(problem or "", stderr) of analyze --board and optimize --board, run in-process."""
    runs = (
        ["analyze", str(TINY_UNET), "--board", str(board)],
        ["optimize", str(TINY_UNET), "-o", str(out), "--board", str(board), "--unverified"],
    )
    results = []
    for args in runs:
        start = time.monotonic()
        rc = cli.main(args)
        err = capsys.readouterr().err
        results.append((_problem(rc, err, _tally(rc, err, start)) or "", err))
    assert not out.exists()
    return results


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_every_hostile_board_map_is_refused_in_one_line(
    suffix: str, tmp_path: Path, capsys
) -> None:
    maps = board_maps()
    assert len(maps) >= 99
    problems = {}
    for k, (name, d) in enumerate(maps.items()):
        board = _write(d, tmp_path / f"m{k}{suffix}")
        for problem, err in _both_commands(board, tmp_path / "o.tflite", capsys):
            value = next((v for label, v in NAMES.items() if name.endswith(f"name {label}")), None)
            if not problem and isinstance(value, str) and 0 < len(value) <= 40:
                if repr(value)[1:-1] not in err:
                    problem = f"the name is not shown escaped: {err[:300]!r}"
            if problem:
                problems[name] = problem
        _TALLY["maps"] += 1
    assert not problems, problems


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_deep_long_and_broken_texts_are_refused_in_one_line(
    name: str, tmp_path: Path, capsys
) -> None:
    suffix, text = TEXTS[name]
    board = tmp_path / f"b{suffix}"
    board.write_bytes(text if isinstance(text, bytes) else text.encode())
    says = (
        "more than 20 digits"
        if "digit" in name
        else "nest more than 8 deep"
        if "deep" in name
        else ""
    )
    problems = [
        p or err
        for p, err in _both_commands(board, tmp_path / "o.tflite", capsys)
        if p or says not in err
    ]
    _TALLY["maps"] += 1
    assert not problems, problems


def test_files_that_are_no_board_file_are_refused_without_blocking(tmp_path: Path) -> None:
    """In a child process with a timeout: a FIFO opened for reading would block for ever."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    problems = {}
    for name, path in _files(tmp_path).items():
        for cmd in (["analyze", str(TINY_UNET)], ["optimize", str(TINY_UNET), "-o", "o.tflite"]):
            start = time.monotonic()
            try:
                p = subprocess.run(
                    [sys.executable, "-m", "tinyseg_plugin.cli", *cmd, "--board", str(path)],
                    cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                problems[name] = "hangs"
                continue
            problem = _problem(p.returncode, p.stderr, _tally(p.returncode, p.stderr, start))
            if problem or SAYS[name] not in p.stderr or "o.tflite" in os.listdir(tmp_path):
                problems[name] = problem or p.stderr
        _TALLY["maps"] += 1
    assert not problems, problems


# ---------------------------------------------------------------- sizes and rates on the command line

FIGURES = ["9" * 400, "1" * 5000, "5e-324", "1e-300", "inf", "nan", "-1", "", "1e9999KB", "0",
           "\x1b[31m1", "1e308", "-inf"]  # fmt: skip
OPTIONS = {  # option -> the figures of FIGURES it must refuse (5e-324 s is a valid time limit)
    "--target": FIGURES,
    "--max-io-bytes": FIGURES,
    "--rate": FIGURES,
    "--runs": FIGURES,
    "--time-limit": [f for f in FIGURES if f not in ("5e-324", "1e-300")],
}


# Run in one child process under a 2 GiB address-space limit: a figure that slips through (a
# 400-digit --runs) must fail the test, not exhaust the machine.
_OPTION_RUNS = r"""
import contextlib, io, json, resource, sys
from tinyseg_plugin import cli
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
out = []
for args in json.loads(sys.stdin.read()):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = cli.main(args)
    out.append([rc, err.getvalue()])
print(json.dumps(out))
"""


def test_every_hostile_size_and_rate_is_refused_in_one_line(tmp_path: Path, counts) -> None:
    out = tmp_path / "o.tflite"
    runs = [
        (option, ["optimize", str(TINY_UNET), "-o", str(out), option, figure])
        for option, figures in OPTIONS.items()
        for figure in figures
    ]
    runs += [
        (option, ["remote-host", "--port", str(tmp_path / "none"), option, figure])
        for option, figure in (("--capacity", "9" * 400), ("--baud", "9" * 400),
                               ("--timeout", "inf"), ("--capacity", "1e9999KB"),
                               ("--timeout", "nan"), ("--baud", "0"))
    ]  # fmt: skip
    p = subprocess.run(
        [sys.executable, "-c", _OPTION_RUNS],
        input=json.dumps([args for _, args in runs]),
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert p.returncode == 0, p.stderr[-2000:]
    problems = {}
    for (option, args), (rc, err) in zip(runs, json.loads(p.stdout)):
        problem = _problem(rc, err, 0.0)
        if problem or option not in err:
            problems[f"{args[0]} {option} {args[-1][:20]!r}"] = problem or err
    assert not out.exists()
    assert not problems, problems
    counts(f"hostile sizes and rates: {len(runs)} option values refused, each exit 2 in one line")


def _extreme_board(path: Path) -> Path:
    """A board whose every figure is at the edge of its limits (boards.LIMITS), all accepted."""
    d = json.loads(json.dumps(GOOD))
    d["clock_hz"] = 1e3
    d["region"][1].update(capacity=1 << 48, endurance=10**15, page_size=1, sector_size=1 << 32,
                          read_bandwidth=1.0, write_bandwidth=1e15, sector_erase_time=3600.0,
                          page_program_time=3600.0)  # fmt: skip
    return _write(d, path)


@pytest.mark.parametrize("rate", ["1e-9", "1e9"])
def test_extreme_accepted_figures_print_bounded_figures(rate: str, tmp_path: Path, capsys) -> None:
    """At the limits (capacity 2^48, 10^15 cycles, a rate of 1e-9/s) the cost model stays finite
    and every printed figure is short: a wear-out past a million years says so."""
    model = tmp_path / "m.tflite"
    model.write_bytes(model_to_bytes(synth.tiny_unet_like()))
    board = _extreme_board(tmp_path / "x.json")
    rc = cli.main(["optimize", str(model), "-o", str(tmp_path / "o.tflite"), "--board", str(board),
                   "--target", "1KB", "--unverified", "--rate", rate, "-q"])  # fmt: skip
    cap = capsys.readouterr()
    assert rc in (0, 3) and "Traceback" not in cap.err and "internal error" not in cap.err
    text = cap.out + cap.err
    assert "inf" not in text.replace("inference", "") and "nan" not in text
    assert max(len(line) for line in text.splitlines()) < 400
    if rate == "1e-9":
        assert "more than 1,000,000 years" in cap.out, cap.out


# ---------------------------------------------------------------- StreamChain body shapes

_NAN = float("nan")
SHAPES = {
    "dimension inf": ("shape", lambda s: s[:1] + [float("inf")] + s[2:]),
    "dimension -inf": ("shape", lambda s: s[:1] + [float("-inf")] + s[2:]),
    "dimension NaN": ("shape", lambda s: s[:1] + [_NAN] + s[2:]),
    "dimension -5": ("shape", lambda s: s[:1] + [-5] + s[2:]),
    "dimension 2^62": ("shape", lambda s: s[:1] + [1 << 62] + s[2:]),
    "dimension 2.5": ("shape", lambda s: s[:1] + [2.5] + s[2:]),
    "dimension 0": ("shape", lambda s: s[:1] + [0] + s[2:]),
    "rank 100": ("shape", lambda s: s * 25),
    "zero point inf": ("zero_point", lambda z: [float("inf")] * len(z)),
    "quantized_dimension NaN": ("quantized_dimension", lambda q: _NAN),
}


def test_hostile_stream_chain_body_shapes_are_refused_by_the_contract(
    tmp_path: Path, capsys, counts
) -> None:
    base = hostile_models.base_models()["stream"]
    problems = {}
    for name, (key, fn) in SHAPES.items():
        edit = hostile_models._tensor("CONV_2D", key, fn)
        path = tmp_path / f"{len(problems)}_{key}.tflite"
        path.write_bytes(hostile_models.mutate(base, hostile_models.Mutation(name, "stream",
                                                                             "StreamChain", edit)))  # fmt: skip
        start = time.monotonic()
        rc = cli.main(["analyze", str(path)])
        cap = capsys.readouterr()
        problem = _problem(rc, cap.err, time.monotonic() - start)
        if problem or "StreamChain" not in cap.err:
            problems[name] = problem or cap.err
    assert not problems, problems
    counts(f"hostile StreamChain body shapes: {len(SHAPES)} refused by the contract in one line")
