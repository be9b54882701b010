"""The options of ``analyze`` and ``optimize``, written once: the ``tinyseg`` command line and the
tflite-tools plugin both render these tables (cli.py, plugin.py), so a flag, its default, its
parser and its help are the same in both. Adding an option is one ``Option`` in a table, and the
place the pipeline reads it (``run_for``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from . import deadline
from .deprecation import deprecated
from .errors import shown

MAX_COUNT = 1_000_000  # --runs: a million TFLM runs is days of work, more is a typo
MAX_SECONDS = 1_000_000.0  # --time-limit, --timeout: 11.6 days; more overflows the waits' clocks
MAX_BAUD = 100_000_000  # --baud: above any serial line's rate


def positive_int(text: str, limit: int = MAX_COUNT) -> int:
    """argparse type: a whole number from 1 to ``limit``."""
    digits = text.strip().lstrip("+")
    if not digits.isdigit() or len(digits) > len(str(limit)):
        if digits.isdigit():
            raise argparse.ArgumentTypeError(f"'{shown(text, 40)}': must be at most {limit:,}")
        raise argparse.ArgumentTypeError(f"'{shown(text, 40)}' is not a whole number")
    value = int(digits)
    if not 1 <= value <= limit:
        raise argparse.ArgumentTypeError(f"'{shown(text, 40)}': must be from 1 to {limit:,}")
    return value


def baud_rate(text: str) -> int:
    """argparse type for ``--baud``."""
    return positive_int(text, MAX_BAUD)


def positive_seconds(text: str) -> float:
    """argparse type: a positive number of seconds, at most MAX_SECONDS."""
    try:
        value = float(text) if len(text) <= 40 else float("nan")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{shown(text, 40)}' is not a number of seconds"
        ) from None
    if not 0 < value <= MAX_SECONDS:  # NaN and inf fail too
        raise argparse.ArgumentTypeError(
            f"'{shown(text, 40)}': must be a positive number of seconds, at most {MAX_SECONDS:,.0f}"
        )
    return value


def parse_size(text: str) -> int:
    """argparse type for byte sizes (tinyseg_plugin/sizes.py)."""
    from .sizes import parse_size as parse

    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_target(text: str) -> dict:
    """argparse type for --target: 'min' or a size, as Options fields (pipeline.target_fields)."""
    from .pipeline import target_fields

    try:
        return target_fields(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_rate(text: str) -> float:
    """argparse type for ``--rate`` (tinyseg_plugin/sizes.py owns its bounds)."""
    from .sizes import parse_rate

    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True)
class Option:
    """One option as both adapters take it. ``parse`` is the argparse type (None: the text as
    given); ``switch``: a flag without value; ``old``: deprecated spellings (deprecation.py);
    ``plugin``: the plugin's spellings where they differ from ``flags`` (a name the host already
    owns, or the plugin's established one); ``host``: the host's own option that does this job,
    so the plugin adds none (``-o``: the host writes the model)."""

    flags: tuple[str, ...]
    dest: str
    help: str
    parse: Callable[[str], Any] | None = None
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False
    required: bool = False
    nargs: str | None = None
    const: Any = None
    old: tuple[str, ...] = ()
    plugin: tuple[str, ...] | None = None
    host: str | None = None

    @property
    def plugin_flags(self) -> tuple[str, ...]:
        """The spellings the plugin adds (none when the host owns the job)."""
        if self.host is not None:
            return ()
        return self.plugin if self.plugin is not None else self.flags

    def add_to(self, p, plugin: bool = False) -> None:
        """Add this option to an argparse parser or group. For the plugin, values stay text
        (``value`` parses them): the host prints argparse's errors as usage, the plugin's own
        check refuses a bad value with one line."""
        flags = self.plugin_flags if plugin else self.flags
        if not flags:
            return
        kwargs: dict[str, Any] = {"dest": self.dest, "help": self.help}
        if self.switch:
            kwargs["action"] = "store_true"
        else:
            kwargs["default"] = self.default
            if self.metavar is not None:
                kwargs["metavar"] = self.metavar
            if not plugin:
                kwargs.update(type=self.parse, choices=self.choices, required=self.required)
            if self.nargs is not None:
                kwargs.update(nargs=self.nargs, const=self.const)
        p.add_argument(*flags, **kwargs)
        if self.old:
            extra = {} if plugin else {"choices": self.choices}
            deprecated(p, *self.old, use=self.flags[0], dest=self.dest, **extra)

    def value(self, given: Any) -> Any:
        """The parsed value of what the plugin's host stored (argparse's own rule: text goes
        through ``parse``, any other default is taken as it is); ValueError: one sentence that
        names the option."""
        if given is None or self.switch:
            given = self.default if given is None else given
        if not isinstance(given, str):
            return given
        name = self.plugin_flags[0] if self.plugin_flags else self.flags[0]
        if self.choices is not None and given not in self.choices:
            raise ValueError(
                f"{name}: '{shown(given, 40)}' is not one of: {', '.join(self.choices)}"
            )
        if self.parse is None:
            return given
        try:
            return self.parse(given)
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"{name}: {exc}") from None


def _kernel_sets() -> tuple[str, ...]:
    from .memory.runtimes import KERNEL_SET_NAMES

    return tuple(KERNEL_SET_NAMES)


def _build_profiles() -> tuple[str, ...]:
    from .memory.runtimes import BUILD_PROFILE_NAMES

    return tuple(BUILD_PROFILE_NAMES)


COMMON = (
    Option(
        ("--kernel-set",),
        "kernel_set",
        "kernel set the plan is for: which implementation each operator gets in the TFLM build "
        "(reference, cmsis-nn, or a runtime fork's: arduino, esp-idf, zephyr, edge-impulse; "
        "default: reference)",
        default="reference",
        metavar="SET",
        choices=_kernel_sets(),
        old=("--runtime", "--kernels"),
    ),
    Option(
        ("--build-profile",),
        "build_profile",
        "build the tail estimate assumes: host64 (64-bit host, the tflite-micro wheel) or "
        "cortex-m (32-bit firmware) (default: host64; cortex-m for the arduino, esp-idf, zephyr "
        "and edge-impulse kernel sets)",
        metavar="PROFILE",
        choices=_build_profiles(),
        old=("--arch",),
    ),
    Option(
        ("--board",),
        "board",
        "memory map the modelled cost is for: generic, nicla-vision, esp32-s3-psram, or a "
        ".toml/.json file (docs/boards.md; `tinyseg boards` lists the presets; default: generic)",
        metavar="NAME|FILE",
    ),
)

STREAM_IO = Option(
    ("--stream-io",),
    "stream_io",
    "the graph's inputs and outputs come in and go out row by row through the application's "
    "row sources and sinks (tinyseg::Runtime, docs/runtime.md), so the arena holds neither whole",
    switch=True,
)

# analyze's own outputs: the host's analyze writes its tables, CSV and plot itself, and the
# plugin adds its section to them.
ANALYZE = COMMON + (
    Option(
        ("--json",),
        "json",
        "write the analysis as JSON (to stdout without FILE)",
        metavar="FILE",
        nargs="?",
        const="-",
        host="the plugin's section in the host's report and --csv",
    ),
    Option(
        ("--csv",),
        "csv",
        "write tensors.csv, operators.csv and buffers.csv into DIR",
        metavar="DIR",
        host="--csv",
    ),
    Option(
        ("--plot",),
        "plot",
        "draw the arena plan and per-operator memory",
        metavar="FILE.png",
        host="--plot",
    ),
    Option(
        ("--stream",),
        "stream",
        "also estimate the head if chains of row-local operators ran row by row (planner "
        "figures over every row-local operator; `optimize` streams the chains the StreamChain "
        "kernel computes)",
        switch=True,
        host="tflite-tools optimize --plugin tinyseg",
    ),
    replace(
        STREAM_IO,
        help="with --stream's estimate (implied): " + STREAM_IO.help,
        host="tflite-tools optimize --plugin tinyseg",
    ),
)

# optimize's options, in the order of `tinyseg optimize --help`.
OPTIMIZE = (
    Option(("-o", "--output"), "output", "optimized .tflite to write", required=True, host="-o"),
    Option(
        ("--target",),
        "target",
        "arena head to reach, e.g. 160KB: of the plans that fit, the one whose storage traffic "
        "costs the least modelled time on --board; 'min': the smallest head at any price "
        "(default: the smallest total, head + tail estimate, that writes no flash and adds at "
        "most 1%% modelled latency)",
        parse=parse_target,
    ),
    Option(("--no-partial",), "no_partial", "spill whole tensors only", switch=True),
    Option(("--no-fuse",), "no_fuse", "no fused fetching", switch=True),
    Option(
        ("--no-split",),
        "no_split",
        "never split an ADD/SUB/MUL over a concatenation into per-slice operators",
        switch=True,
    ),
    Option(
        ("--no-scratch16",), "no_scratch16", "keep TRANSPOSE_CONV's full int32 scratch", switch=True
    ),
    Option(
        ("--no-stream",),
        "no_stream",
        "no StreamChain operators (chains of row-local operators computed row by row)",
        switch=True,
    ),
    STREAM_IO,
    *COMMON,
    Option(
        ("--rate",),
        "rate",
        "inferences per second the flash wear-out years assume (default: 1)",
        parse=positive_rate,
        default=1.0,
        metavar="PER_SECOND",
    ),
    Option(("--report",), "report", "write the optimization report", metavar="FILE.json"),
    Option(
        ("--plot",),
        "plot",
        "draw the optimized arena plan",
        metavar="FILE.png",
        plugin=("--tinyseg-plot",),  # the host's --plot draws its own memory plot
    ),
    Option(
        ("--csv",),
        "csv",
        "write regions.csv (each --board region with the plan on it) and operators.csv "
        "(each operator's modelled compute and storage time) into DIR",
        metavar="DIR",
        plugin=("--tinyseg-csv",),  # the host's --csv writes its own tables
    ),
    Option(
        ("--storage-header",),
        "storage_header",
        "write the Nicla Vision sketch's RAM storage regions for this plan where the --board "
        "map's address or section puts them; its spill region must be flash (docs/runtime.md)",
        metavar="FILE.h",
    ),
    Option(
        ("--frontier",),
        "frontier",
        "also print the trade-off on --board: every plan the targeted search writes that no "
        "other beats in head, modelled latency and flash written, each with the --target that "
        "writes it again (one search per step down, at most 48; planner figures)",
        switch=True,
    ),
    Option(
        ("--frontier-plot",),
        "frontier_plot",
        "draw that frontier (implies --frontier)",
        metavar="FILE.png",
    ),
    Option(
        ("--runs",),
        "runs",
        "random inputs for verification, at least 1 (default: 3; 3 edge-case inputs are added)",
        parse=positive_int,
        default=3,
        metavar="RUNS",
        plugin=("--verify-runs",),  # the plugin's spelling since its first release
    ),
    Option(
        ("--unverified", "--no-verify"),
        "unverified",
        "write the result without the bit-exact check in TFLM, marked UNVERIFIED (for models with "
        "operators TFLM does not ship)",
        switch=True,
    ),
    Option(
        ("--time-limit",),
        "time_limit",
        "seconds the whole run may take (wall clock), and each TFLM run of the verification "
        "(CPU time) (default: 600)",
        parse=positive_seconds,
        default=deadline.DEFAULT_TIME_LIMIT,
        metavar="SECONDS",
    ),
    Option(
        ("--max-io-bytes",),
        "max_io_bytes",
        "bytes one run's inputs and outputs may take, per model (default: 256MiB); a model "
        "over it is refused before any input is built (the check keeps several copies of them)",
        parse=parse_size,
        default="256MiB",
        metavar="SIZE",
    ),
    Option(("-q", "--quiet"), "quiet", "no progress lines", switch=True),
    Option(
        ("--tflm-dir",),
        "tflm_dir",
        "TFLM tree: check with TinySeg's real kernels in a cached host build of it (default: "
        "$TFLM_DIR; without either, TinySeg operators are lowered to builtins)",
        metavar="DIR",
    ),
    Option(
        ("--force",),
        "force",
        "allow -o to be the input model (replaced only when done)",
        switch=True,
        host="-o",  # the host writes -o wherever it names
    ),
)


def values(given: Any, table: tuple[Option, ...]) -> dict[str, Any]:
    """Every option of ``table`` by its dest, parsed: ``given`` is a namespace (the host's, where
    values are still text) or a mapping; an option the host owns is left out. ValueError: the
    first bad value, one sentence."""
    get = given.get if isinstance(given, Mapping) else lambda k: getattr(given, k, None)
    return {o.dest: o.value(get(o.dest)) for o in table if o.host is None}


def run_for(v: Mapping[str, Any], **fields: Any):
    """The pipeline's Run for parsed option values (``values``, or the command line's
    namespace as a dict); ``fields``: Options fields a command sets itself."""
    from .memory.boards import DEFAULT_BOARD, load_board
    from .memory.kernels import default_build_profile
    from .pipeline import Run
    from .transforms.optimizer import Options

    build_profile = v.get("build_profile") or default_build_profile(v["kernel_set"])
    return Run(
        Options(kernel_set=v["kernel_set"], build_profile=build_profile, **fields),
        runs=None if v.get("unverified") else v.get("runs", 3),
        time_limit=v.get("time_limit") or deadline.DEFAULT_TIME_LIMIT,
        max_io_bytes=v.get("max_io_bytes"),
        board=load_board(v.get("board") or DEFAULT_BOARD),
        rate=v.get("rate") or 1.0,
        frontier=bool(v.get("frontier") or v.get("frontier_plot")),
    )


def strategy_fields(v: Mapping[str, Any]) -> dict[str, Any]:
    """optimize's target and strategy switches as Options fields."""
    return dict(
        **(v.get("target") or {}),
        partial=not v.get("no_partial"),
        fuse=not v.get("no_fuse"),
        scratch=not v.get("no_scratch16"),
        split=not v.get("no_split"),
        stream=not v.get("no_stream"),
        stream_io=bool(v.get("stream_io")),
    )
