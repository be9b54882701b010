"""patches/tflite-tools against a real tflite-tools checkout at 08709f1.

The patches must apply to a clean checkout, install with pip, run TinySeg as a plugin through the
installed ``tflite-tools`` command, and leave every old ``python tflite_tools.py`` command line as it
was (same stdout, same files). Runs only when TFLITE_TOOLS_DIR names such a checkout:

    TFLITE_TOOLS_DIR=/path/to/tflite-tools python -m pytest tests/test_tflite_tools_patch.py

The checkout is copied, never changed. A venv in a temporary directory sees this interpreter's
packages (numpy, flatbuffers, pluggy, prettytable, tflite-micro) through a .pth file; the patched copy
and a copy of this repository are pip-installed into it (pip may fetch setuptools for the builds and
any tflite-tools dependency this interpreter lacks).
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import synth

from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes, parse_model
from tinyseg_plugin.memory.planner import plan_model

ROOT = Path(__file__).resolve().parent.parent
PATCHES = sorted((ROOT / "patches" / "tflite-tools").glob("*.patch"))
TARGET = "08709f1"
TINY_UNET = ROOT / "examples" / "models" / "tiny_unet.tflite"
BUILD_LEFTOVERS = ("build", "*.egg-info", "__pycache__")
TIMEOUT = 900


@dataclass(frozen=True)
class Env:
    """The copies of the checkout, the venv's interpreter and its tflite-tools command."""

    base: Path
    pristine: Path
    patched: Path
    python: Path
    tool: Path


def _clean_environ() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(cmd: list, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=_clean_environ(),
    )
    if check and p.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
        )
    return p


def _checkout() -> Path:
    value = os.environ.get("TFLITE_TOOLS_DIR")
    if not value:
        pytest.skip("TFLITE_TOOLS_DIR is not set (a tflite-tools checkout at 08709f1)")
    if shutil.which("git") is None:
        pytest.skip("git is needed to apply the patches")
    src = Path(value).expanduser().resolve()
    if (
        not (src / "tflite_tools.py").is_file()
        or not (src / "tflite_tools" / "tflite_model.py").is_file()
    ):
        pytest.skip(f"TFLITE_TOOLS_DIR={src} is not a tflite-tools checkout")
    if (src / ".git").exists():
        head = _run(["git", "-C", src, "rev-parse", "HEAD"]).stdout.strip()
        if not head.startswith(TARGET):
            pytest.skip(
                f"TFLITE_TOOLS_DIR={src} is at {head[:7] or '?'}, the patches are for {TARGET}"
            )
    return src


def _copy_checkout(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".git", *BUILD_LEFTOVERS))
    return dst


def _host_site_pth(python: Path) -> None:
    """Let the venv see this interpreter's packages (tflite-micro, numpy, ...) after its own."""
    purelib = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True
    ).stdout.strip()
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    lines = [f"import site; site.addsitedir({d!r})" for d in dirs if Path(d).is_dir()]
    (Path(purelib) / "_host_site.pth").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    assert PATCHES, "patches/tflite-tools/*.patch"
    src = _checkout()
    base = tmp_path_factory.mktemp("tflite_tools_patch")
    pristine = _copy_checkout(src, base / "pristine")
    patched = _copy_checkout(src, base / "patched")
    _run(
        ["git", "init", "-q"], cwd=patched, check=True
    )  # git apply then resolves paths from the copy
    _run(["git", "apply", *PATCHES], cwd=patched, check=True)

    venv = base / "venv"
    _run([sys.executable, "-m", "venv", venv], check=True)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    _host_site_pth(python)
    repo = base / "tinyseg"
    repo.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, repo / name)
    shutil.copytree(
        ROOT / "tinyseg_plugin",
        repo / "tinyseg_plugin",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run(pip + [patched], check=True)
    _run(pip + ["--no-deps", "-e", repo], check=True)
    return Env(base, pristine, patched, python, bindir / "tflite-tools")


@pytest.fixture(scope="module")
def unet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if TINY_UNET.exists():
        return TINY_UNET
    p = tmp_path_factory.mktemp("models") / "tiny_unet_like.tflite"
    p.write_bytes(model_to_bytes(synth.tiny_unet_like()))
    return p


@pytest.fixture(scope="module")
def branchy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model whose file order is not tflite-tools' best: its reorder pass moves operators."""
    b = synth.ModelBuilder(seed=3)
    x = b.input([1, 16, 16, 4])
    side = b.conv(x, 16)
    wide = b.conv(b.conv(x, 64), 1, k=1)
    y = b.concat([side, wide])
    p = tmp_path_factory.mktemp("models") / "branchy.tflite"
    p.write_bytes(model_to_bytes(b.build([b.conv(y, 2, k=1, relu=False)])))
    return p


@pytest.fixture(scope="module")
def optimized(env: Env, unet: Path) -> tuple[subprocess.CompletedProcess, Path]:
    cwd = env.base / "run-optimize-tinyseg"
    cwd.mkdir()
    # --no-stream: the spill passes, whose Spill rows the host's own table shows (streaming: below)
    p = _run(
        [
            env.tool,
            "optimize",
            "--plugin",
            "tinyseg",
            "--no-stream",
            "--target",
            "min",
            "-i",
            unet,
            "-o",
            "out.tflite",
        ],
        cwd=cwd,
    )
    return p, cwd / "out.tflite"


def _files(d: Path) -> dict[str, bytes]:
    return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}


def _in_fresh_dir(
    env: Env, name: str, cmd: list
) -> tuple[subprocess.CompletedProcess, dict[str, bytes]]:
    cwd = env.base / name
    cwd.mkdir()
    p = _run(cmd, cwd=cwd)
    return p, _files(cwd)


def _legacy(
    env: Env, tree: Path, tag: str, argv: list
) -> tuple[subprocess.CompletedProcess, dict[str, bytes]]:
    return _in_fresh_dir(env, f"{tree.name}-{tag}", [env.python, tree / "tflite_tools.py", *argv])


def _one_error_line(p: subprocess.CompletedProcess) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("tflite-tools: error: "), lines[0]
    return lines[0]


def test_patches_apply_with_patch_p1_to_the_same_tree(env: Env) -> None:
    if shutil.which("patch") is None:
        pytest.skip("no patch(1)")
    other = _copy_checkout(env.pristine, env.base / "patched-with-patch-p1")
    for patch in PATCHES:
        _run(["patch", "-p1", "-s", "-i", patch], cwd=other, check=True)
    ignore = {".git", "build", "tflite_tools.egg-info", "__pycache__"}
    strip = lambda files: {k: v for k, v in files.items() if not ignore & set(Path(k).parts)}  # noqa: E731
    assert strip(_files(other)) == strip(_files(env.patched))


def test_installs_a_tflite_tools_command_with_analyze_and_optimize(env: Env) -> None:
    top = _run([env.tool, "--help"], check=True).stdout
    assert "analyze" in top and "optimize" in top
    assert "--plugin NAME" in top and "installed: tinyseg" in top
    plain = _run([env.tool, "optimize", "--help"], check=True).stdout
    assert "--plugin NAME" in plain and "--target" not in plain
    with_plugin = _run([env.tool, "optimize", "--plugin", "tinyseg", "--help"], check=True).stdout
    assert (
        "--target" in with_plugin
        and "--kernel-set" in with_plugin
        and "--verify-runs" in with_plugin
    )
    analyze = _run([env.tool, "analyze", "--plugin", "tinyseg", "--help"], check=True).stdout
    assert (
        "--kernel-set" in analyze and "--target" not in analyze and "--verify-runs" not in analyze
    )
    where = _run(
        [env.python, "-c", "import tflite_tools.cli as c; print(c.__file__)"],
        cwd=env.base,
        check=True,
    )
    assert (
        str(env.base / "venv") in where.stdout
    )  # the installed package, not a checkout on the path


def test_optimize_with_tinyseg_lowers_the_arena_head_bit_exact(optimized, unet: Path) -> None:
    p, out = optimized
    assert p.returncode == 0, p.stderr
    assert out.exists()
    g0, g1 = build_graph(parse_model(unet.read_bytes())), build_graph(parse_model(out.read_bytes()))
    before, after = plan_model(g0.model).head, plan_model(g1.model).head
    assert after < before
    assert verify(g0, g1).identical
    assert "Plugin analysis (tinyseg):" in p.stdout
    assert f"  head: {after:,}" in p.stdout  # the section describes the model as written
    assert "Optimizing peak memory usage..." in p.stdout  # the built-in reorder ran first
    assert (
        "tinyseg: verified: outputs bit-identical to the reordered model in TFLM on 3 random inputs"
        in p.stdout
    )
    # The host's own table is of the model as written (its Spill row, named after the layer it
    # spills by its token), and both estimates are labelled.
    assert re.search(r"\| +Spill\[re_lu_1_2\]/slot 0 +\|", p.stdout), p.stdout
    assert "tflite-tools' peak estimate: 230,400 B before the plugins" in p.stdout
    assert "leaves out kernel scratch" in p.stdout and "  head_is: TFLM arena head" in p.stdout
    assert (
        "{'" not in p.stdout
    )  # nested values printed as the host prints the rest, not as Python reprs


def test_the_old_script_takes_plugins_too(env: Env, unet: Path, optimized) -> None:
    p, files = _legacy(
        env,
        env.patched,
        "plugin",
        [
            *("-i", unet, "--optimize", "--plugin", "tinyseg", "--no-stream"),
            *("--target", "min", "-o", "out.tflite"),
        ],
    )
    assert p.returncode == 0, p.stderr
    assert files["out.tflite"] == optimized[1].read_bytes()
    # the same lines; the second run may take the original's outputs from the cache
    cached = "; original's outputs from the cache"
    assert p.stdout.replace(cached, "") == optimized[0].stdout.replace(cached, "")


@pytest.mark.parametrize(
    "tag, argv",
    [
        ("analyze", ["-i", "{m}"]),
        ("optimize", ["-i", "{m}", "--optimize", "-o", "old.tflite"]),
        ("macs-size", ["-i", "{m}", "--optimize", "--calc-macs", "--calc-size"]),
        ("csv", ["-i", "{m}", "--optimize", "--csv", "csv", "-o", "old.tflite"]),
        ("plot", ["-i", "{m}", "--optimize", "--plot", "p.png"]),
        ("help", ["--help"]),
        ("bad-option", ["-i", "{m}", "--no-such-option"]),
    ],
)
def test_old_command_lines_are_unchanged(env: Env, unet: Path, tag: str, argv: list[str]) -> None:
    argv = [a.format(m=unet) for a in argv]
    old, old_files = _legacy(env, env.pristine, tag, argv)
    new, new_files = _legacy(env, env.patched, tag, argv)
    assert (new.returncode, new.stdout, new.stderr) == (old.returncode, old.stdout, old.stderr)
    assert new_files == old_files
    if tag == "optimize":
        assert old.returncode == 0 and "old.tflite" in old_files


def test_old_reorder_is_unchanged_where_operators_move(env: Env, branchy: Path) -> None:
    argv = ["-i", branchy, "--optimize", "-o", "old.tflite"]
    old, old_files = _legacy(env, env.pristine, "moves", argv)
    new, new_files = _legacy(env, env.patched, "moves", argv)
    assert new.returncode == 0, new.stderr
    moved = new_files["old.tflite"]
    assert moved != branchy.read_bytes()
    if old.returncode == 0:
        assert new.stdout == old.stdout
        assert moved == old_files["old.tflite"]
    else:
        # Unpatched 08709f1 cannot move an operator later under NumPy 2 (0002 fixes exactly that):
        # check the reordered model the only other way, by running it.
        assert int(np.__version__.split(".")[0]) >= 2 and "OverflowError" in old.stderr, old.stderr
        g0, g1 = build_graph(parse_model(branchy.read_bytes())), build_graph(parse_model(moved))
        assert plan_model(g1.model).head < plan_model(g0.model).head
        assert verify(g0, g1).identical


def test_subcommands_match_the_old_script(env: Env, unet: Path) -> None:
    old, old_files = _legacy(
        env, env.pristine, "same-as-optimize", ["-i", unet, "--optimize", "-o", "m.tflite"]
    )
    new, new_files = _in_fresh_dir(
        env, "tool-optimize", [env.tool, "optimize", "-i", unet, "-o", "m.tflite"]
    )
    assert new.returncode == old.returncode == 0, new.stderr
    assert (new.stdout, new_files) == (old.stdout, old_files)
    old, _ = _legacy(env, env.pristine, "same-as-analyze", ["-i", unet])
    new, _ = _in_fresh_dir(env, "tool-analyze", [env.tool, "analyze", "-i", unet])
    assert new.returncode == old.returncode == 0, new.stderr
    assert new.stdout == old.stdout


def test_analyze_csv_has_the_plugin_section(env: Env, unet: Path) -> None:
    p, files = _in_fresh_dir(
        env,
        "tool-analyze-csv",
        [env.tool, "analyze", "--plugin", "tinyseg", "-i", unet, "--csv", "csv"],
    )
    assert p.returncode == 0, p.stderr
    assert {
        "csv/tensor_details.csv",
        "csv/execution_schedule_info.csv",
        "csv/plugin_tinyseg.csv",
    } <= set(files)
    rows = dict(
        line.split(",", 1) for line in files["csv/plugin_tinyseg.csv"].decode().splitlines()
    )
    head = plan_model(parse_model(unet.read_bytes())).head
    assert rows["head"] == str(head)
    assert "Plugin analysis (tinyseg):" in p.stdout


@pytest.mark.parametrize("script", [False, True])
def test_unknown_plugin_is_one_line(env: Env, unet: Path, script: bool) -> None:
    cmd = [env.python, env.patched / "tflite_tools.py"] if script else [env.tool, "analyze"]
    p, files = _in_fresh_dir(
        env, f"unknown-{script}", cmd + ["-i", unet, "--plugin", "no-such-plugin"]
    )
    assert p.returncode != 0 and not files and not p.stdout
    assert "unknown plugin 'no-such-plugin' (installed: " in _one_error_line(p)


def test_plugin_value_error_is_one_line_exit_2(env: Env, unet: Path) -> None:
    p, files = _in_fresh_dir(
        env,
        "bad-target",
        [
            env.tool,
            "optimize",
            "--plugin",
            "tinyseg",
            "--target",
            "12XB",
            "-i",
            unet,
            "-o",
            "out.tflite",
        ],
    )
    assert p.returncode == 2
    assert _one_error_line(p).startswith(
        "tflite-tools: error: tinyseg: --target: '12XB' is not a size"
    )
    assert "out.tflite" not in files


@pytest.mark.parametrize("how", ["tool", "script"])
def test_a_model_tinyseg_wrote_can_be_analysed_again(env: Env, optimized, how: str) -> None:
    """Without --plugin: the installed plugin describes Spill/Fetching/FetchingConv2D to the host's reader."""
    _, out = optimized
    cmd = (
        [env.tool, "analyze", "-i", out]
        if how == "tool"
        else [env.python, env.patched / "tflite_tools.py", "-i", out]
    )
    p, files = _in_fresh_dir(env, f"reanalyse-{how}", cmd + ["--csv", "csv"])
    assert p.returncode == 0, p.stderr
    schedule = files["csv/execution_schedule_info.csv"].decode()
    assert "Spill[" in schedule  # its token's name: the layer it spills and the slot
    g = build_graph(parse_model(out.read_bytes()))
    assert len(schedule.strip().splitlines()) == 1 + len(g.operators)


def test_chaining_optimize_on_an_optimized_model_keeps_its_order(env: Env, optimized) -> None:
    _, out = optimized
    p, files = _in_fresh_dir(
        env,
        "chain",
        [
            env.tool,
            "optimize",
            "--plugin",
            "tinyseg",
            "--no-stream",
            "--target",
            "min",
            "-i",
            out,
            "-o",
            "again.tflite",
        ],
    )
    assert p.returncode == 0, p.stderr
    assert "keeping its operator order" in p.stdout
    g0 = build_graph(parse_model(out.read_bytes()))
    g1 = build_graph(parse_model(files["again.tflite"]))
    assert plan_model(g1.model).head <= plan_model(g0.model).head


def test_a_model_no_installed_plugin_describes_is_one_line_exit_2(env: Env, optimized) -> None:
    """A Spill without its token (no output: the reader cannot read it alone) and no plugin."""
    _, written = optimized
    m = parse_model(written.read_bytes())
    spill = next(
        op for op in build_graph(m).operators if op.opcode == customops.SPILL and op.outputs
    )
    m.subgraphs[0].operators[spill.index].outputs = []
    out = env.base / "no-token.tflite"
    out.write_bytes(model_to_bytes(m))
    code = (
        "import sys, tflite_tools.plugins as p; p.installed_plugins = lambda: []; "
        "from tflite_tools.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    p, files = _in_fresh_dir(env, "no-describer", [env.python, "-c", code, "analyze", "-i", out])
    assert p.returncode == 2 and not files and not p.stdout
    line = _one_error_line(p)
    assert "custom operator 'Spill'" in line and "no plugin is installed" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["--plug", "tinyseg"],
        ["--plugin", "tinyseg", "--plug", "x"],
        ["--plugin=tinyseg", "--targ", "1"],
    ],
)
def test_no_abbreviation_is_accepted(env: Env, unet: Path, argv: list[str]) -> None:
    p, files = _in_fresh_dir(
        env,
        f"abbrev-{len(argv)}-{argv[-1]}",
        [env.tool, "optimize", "-i", unet, "-o", "o.tflite", *argv],
    )
    assert p.returncode == 2 and not files
    assert "unrecognized arguments" in p.stderr


def test_script_with_a_plugin_accepts_no_abbreviation(env: Env, unet: Path) -> None:
    p, files = _legacy(
        env, env.patched, "abbrev", ["-i", unet, "--plugin", "tinyseg", "--plug", "x"]
    )
    assert p.returncode == 2 and not files and "unrecognized arguments: --plug" in p.stderr


def test_unreachable_target_writes_the_best_model_and_exits_3(
    env: Env, unet: Path, optimized
) -> None:
    p, files = _in_fresh_dir(
        env,
        "target-3",
        [
            env.tool,
            "optimize",
            "--plugin",
            "tinyseg",
            "--no-stream",
            "--target",
            "50KB",
            "-i",
            unet,
            "-o",
            "out.tflite",
        ],
    )
    assert p.returncode == 3
    # the plan written (spills to flash) is warned of on stderr first, as the command line does
    *warnings, last = p.stderr.strip().splitlines()
    assert warnings and all(w.startswith("tinyseg: warning: ") for w in warnings), p.stderr
    assert (
        last
        == "tflite-tools: error: tinyseg: target 50,000 B not reachable: best head 153,600 B (written)"
    )
    assert files["out.tflite"] == optimized[1].read_bytes()


@pytest.mark.parametrize("runs", ["0", "-1"])
def test_verify_runs_below_one_is_refused_before_anything_runs(
    env: Env, unet: Path, runs: str
) -> None:
    p, files = _in_fresh_dir(
        env,
        f"runs{runs}",
        [
            env.tool,
            "optimize",
            "--plugin",
            "tinyseg",
            "--verify-runs",
            runs,
            "-i",
            unet,
            "-o",
            "out.tflite",
        ],
    )
    assert p.returncode == 2 and not files and not p.stdout
    assert f"--verify-runs: '{runs}'" in _one_error_line(p)


def test_bad_plugin_option_is_refused_before_the_analysis(env: Env, unet: Path) -> None:
    p, _ = _in_fresh_dir(
        env,
        "bad-runtime",
        [env.tool, "analyze", "--plugin", "tinyseg", "--kernel-set", "fast", "-i", unet],
    )
    assert p.returncode == 2 and not p.stdout
    assert "--kernel-set: 'fast'" in _one_error_line(p)


def test_missing_model_with_a_plugin_is_one_line(env: Env) -> None:
    p, _ = _in_fresh_dir(
        env, "missing", [env.tool, "analyze", "--plugin", "tinyseg", "-i", "no-such.tflite"]
    )
    assert p.returncode == 2 and not p.stdout
    assert _one_error_line(p) == "tflite-tools: error: No such file or directory: no-such.tflite"


@pytest.fixture(scope="module")
def split_model(env: Env, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A V-Net-like model TinySeg optimizes with SPLIT_V (two outputs), Spill and Fetching."""
    d = tmp_path_factory.mktemp("split")
    src = d / "vnet_like.tflite"
    src.write_bytes(model_to_bytes(synth.vnet_like()))
    p = _run(
        [env.tool, "optimize", "--plugin", "tinyseg", "--no-stream", "--target", "min"]
        + ["-i", src, "-o", "out.tflite"],
        cwd=d,
        check=True,
    )
    assert "Plugin tinyseg rewrote the model" in p.stdout
    return src, d / "out.tflite"


def test_a_model_with_split_v_spill_and_fetching_is_read_and_plotted(env: Env, split_model) -> None:
    src, out = split_model
    g = build_graph(parse_model(out.read_bytes()))
    opcodes = {op.opcode for op in g.operators}
    assert {"SPLIT_V", "Spill", "Fetching"} <= opcodes
    p, files = _in_fresh_dir(
        env, "split-analyse", [env.tool, "analyze", "-i", out, "--csv", "csv", "--plot", "p.png"]
    )
    assert p.returncode == 0, p.stderr
    rows = files["csv/execution_schedule_info.csv"].decode().strip().splitlines()
    assert len(rows) == 1 + len(g.operators)
    assert files["p.png"].startswith(b"\x89PNG")
    again, files = _in_fresh_dir(
        env,
        "split-again",
        [
            env.tool,
            "optimize",
            "--plugin",
            "tinyseg",
            "--no-stream",
            "--target",
            "min",
            "-i",
            out,
            "-o",
            "again.tflite",
        ],
    )
    assert again.returncode == 0, again.stderr
    assert "keeping its operator order" in again.stdout
    assert verify(
        build_graph(parse_model(src.read_bytes())), build_graph(parse_model(files["again.tflite"]))
    ).identical


def test_optimize_with_tinyseg_streams_to_the_smallest_head(env: Env, unet: Path) -> None:
    """Streaming through the real host: --target min writes StreamChain operators (the host's
    table names them by the token the plugin's describe hook lists first) under 64,000 B of head, verified
    bit-exact."""
    p, files = _in_fresh_dir(
        env,
        "stream",
        [env.tool, "optimize", "--plugin", "tinyseg", "--target", "min"]
        + ["-i", unet, "-o", "out.tflite"],
    )
    assert p.returncode == 0, p.stderr
    g0, g1 = (
        build_graph(parse_model(unet.read_bytes())),
        build_graph(parse_model(files["out.tflite"])),
    )
    assert "StreamChain" in {op.opcode for op in g1.operators}
    assert plan_model(g1.model).head <= 64_000 and verify(g0, g1).identical
    assert "StreamChain[" in p.stdout  # its token, named after the layers it holds


MACS_PLANS = {
    "streamed": [],
    "row-spills": ["--target", "153119"],
    "spilled": ["--no-stream", "--no-fuse", "--no-scratch16", "--target", "min"],
    "fused": ["--no-stream", "--target", "min"],
}


def _total_macs(env: Env, model: Path, tag: str) -> tuple[int, str]:
    p, _ = _in_fresh_dir(env, tag, [env.tool, "analyze", "--calc-macs", "-i", model])
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("Total MACs:"))
    return int(line.split(":")[1].replace(",", "")), p.stdout


@pytest.mark.parametrize("plan", list(MACS_PLANS))
def test_analyze_counts_the_originals_macs_and_names_the_chains(
    env: Env, unet: Path, plan: str
) -> None:
    """tflite-tools' own --calc-macs on what the plugin wrote: the same total as on the original
    (the plugin gives each StreamChain and FetchingConv2D the MACs of the operators it holds), and
    each StreamChain's row labelled with the layers it holds."""
    p, files = _in_fresh_dir(
        env,
        f"macs-{plan}",
        [env.tool, "optimize", "--plugin", "tinyseg", "--unverified", *MACS_PLANS[plan]]
        + ["-i", unet, "-o", "out.tflite"],
    )
    assert p.returncode == 0, p.stderr
    out = env.base / f"macs-{plan}" / "out.tflite"
    want, _ = _total_macs(env, unet, f"macs-{plan}-original")
    got, text = _total_macs(env, out, f"macs-{plan}-optimized")
    assert got == want and want > 0, (got, want)
    from test_graph_edges import chain_labels

    g = build_graph(parse_model(files["out.tflite"]))
    chains = [op for op in g.operators if op.opcode == "StreamChain"]
    # a chain whose outputs are all graph outputs keeps their names
    named = [n for n, op in zip(chain_labels(g), chains) if not set(op.outputs) <= set(g.outputs)]
    assert all(name.startswith("StreamChain[") and name in text for name in named), named
    assert named or not chains


# ---------------------------------------------------------------- the plugin at par with the CLI

# Every option of `tinyseg optimize` in one group or another (the CLI's spelling; the table
# gives the plugin's), with the exit code both must return. --unverified where the check is not
# the point: each check costs seconds per run.
PARITY = [
    ("default", ["--unverified", "--report", "r.json", "-q"], 0),
    ("target-size", ["--target", "100KB", "--unverified", "--report", "r.json"], 0),
    ("target-min", ["--target", "min", "--no-stream", "--unverified", "--plot", "p.png"], 0),
    (
        "switches",
        ["--target", "min", "--no-partial", "--no-fuse", "--no-split", "--no-scratch16"]
        + ["--no-stream", "--build-profile", "cortex-m", "--unverified"],
        0,
    ),
    (
        "board",
        ["--board", "nicla-vision", "--storage-header", "s.h", "--csv", "csv", "--report", "r.json"]
        + ["--kernel-set", "cmsis-nn", "--rate", "10", "--unverified"],
        0,
    ),
    ("frontier", ["--no-stream", "--frontier", "--frontier-plot", "f.png", "--unverified"], 0),
    ("stream-io", ["--stream-io", "--target", "min", "--unverified", "--report", "r.json"], 0),
    (
        "verified",
        ["--target", "200KB", "--no-stream", "--runs", "1", "--time-limit", "300"]
        + ["--max-io-bytes", "64MiB"],
        0,
    ),
    ("unreachable", ["--target", "1000", "--no-stream", "--unverified", "--report", "r.json"], 3),
    ("bad-tflm-dir", ["--tflm-dir", "no-such-dir", "--report", "r.json"], 2),
    ("bad-target", ["--target", "12XB"], 2),
]


def _plugin_argv(argv: list[str]) -> list[str]:
    """The same options in the plugin's spelling (options.py's table)."""
    from tinyseg_plugin.options import OPTIMIZE

    by_flag = {f: o for o in OPTIMIZE for f in o.flags}
    return [by_flag[a].plugin_flags[0] if a in by_flag else a for a in argv]


def test_parity_groups_take_every_option_of_the_table() -> None:
    from tinyseg_plugin.options import OPTIMIZE

    used = {a for _, argv, _ in PARITY for a in argv}
    missing = [o.flags[0] for o in OPTIMIZE if o.host is None and not set(o.flags) & used]
    assert not missing, f"options no parity group runs: {missing}"
    assert {o.flags[0] for o in OPTIMIZE if o.host is not None} == {"-o", "--force"}


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tinyseg: warning: ")]


@pytest.mark.parametrize("tag, argv, code", PARITY, ids=[t for t, _, _ in PARITY])
def test_plugin_writes_what_the_command_line_writes(
    env: Env, unet: Path, tag: str, argv: list[str], code: int
) -> None:
    """`tinyseg optimize` and `tflite-tools optimize --plugin tinyseg`, each in a folder holding
    only the model (the host's reorder leaves the Tiny U-Net's bytes as they are): the same exit
    code, the same files byte for byte (the model, the report, the CSV, the header, the plots),
    the same warnings on stderr."""
    runs = {}
    for how in ("cli", "plugin"):
        cwd = env.base / f"parity-{tag}-{how}"
        cwd.mkdir()
        shutil.copy2(unet, cwd / "m.tflite")
        cmd = (
            [env.tool.parent / "tinyseg", "optimize", "m.tflite", "-o", "out.tflite", *argv]
            if how == "cli"
            else [env.tool, "optimize", "--plugin", "tinyseg", "-i", "m.tflite", "-o", "out.tflite"]
            + _plugin_argv(argv)
        )
        p = _run(cmd, cwd=cwd)
        runs[how] = (p, _files(cwd))
    (cli, cli_files), (host, host_files) = runs["cli"], runs["plugin"]
    assert (cli.returncode, host.returncode) == (code, code), (cli.stderr, host.stderr)
    assert sorted(host_files) == sorted(cli_files)
    assert host_files == cli_files
    assert ("out.tflite" in cli_files) == (code != 2)
    assert _warnings(host.stderr) == _warnings(cli.stderr)
