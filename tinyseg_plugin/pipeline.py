"""One run of the tool, end to end: model bytes -> model view -> plan and analysis -> strategies
-> verified model and report.

The ``tinyseg`` command line and the tflite-tools plugin are adapters over this module: they map
their options to a ``Run`` and print or return what comes back, so both refuse the same models
with the same sentences and exit codes."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable

from . import deadline
from .checks import interpreter
from .checks import verify as check
from .checks.verify import DEFAULT_MAX_IO_BYTES, Verification, arena_for, check_io_bytes
from .contract import bodies
from .errors import EXIT_VERIFY_FAILED, TinySegError, shown
from .ir.graph import Graph, Memo, build_graph
from .ir.modelio import check_inline_fits, model_to_bytes, parse_model
from .memory.analysis import Analysis, analyze_graph
from .memory.boards import DEFAULT_BOARD, Board, load_board
from .memory.cost import Cost, estimate
from .memory.planner import offline_conflict, plan_graph
from .memory.usage import (
    ModelBytes,
    OpTime,
    OpTraffic,
    RegionUse,
    op_times,
    op_traffic,
    region_usage,
    weight_bytes,
)
from .transforms import optimizer
from .transforms.optimizer import Options, Result

TARGET_MIN = "min"  # --target min: the smallest head at any price, then the least storage time
DEFAULT_TIME_LIMIT = deadline.DEFAULT_TIME_LIMIT


@dataclass
class Run:
    """The settings and state of one run, passed down rather than kept in module globals.

    ``options`` carries the kernel set (``kernel_set``), the build profile (``build_profile``), the target and the
    strategy switches; ``runs`` is the number of random verification inputs (None: unverified);
    ``time_limit`` bounds each TFLM child in CPU seconds; ``max_io_bytes`` bounds the memory of one
    check run's inputs and outputs; ``tflm_dir`` selects the real-kernel check; ``board`` is the
    memory map the modelled cost is for (``--board``) and ``rate`` the inferences per second its
    wear-out years assume (``--rate``); ``memo`` is what the run remembers across the graphs its
    search builds (tensor views, encoded and decoded options), shared by every graph edited from
    the input loaded with it."""

    options: Options = field(default_factory=Options)
    runs: int | None = 3
    time_limit: float = DEFAULT_TIME_LIMIT
    max_io_bytes: int = DEFAULT_MAX_IO_BYTES
    tflm_dir: str | None = None
    progress: Callable[[str], None] | None = None
    # A model TinySeg already rewrote: refused ("give the original"), or, for a host that chains
    # its own passes (tflite-tools optimize on a model TinySeg wrote), kept as it is.
    keep_optimized: bool = False
    memo: Memo = field(default_factory=Memo, repr=False)
    board: Board = field(default_factory=lambda: load_board(DEFAULT_BOARD))
    rate: float = 1.0
    # Also search the next points of the trade-off (Outcome.nearby): two searches more; off
    # only where a caller needs the written plan alone.
    nearby: bool = True
    # Also search the whole trade-off (--frontier: one search per step of the targeted search).
    frontier: bool = False

    def __post_init__(self) -> None:
        if self.max_io_bytes is None:
            self.max_io_bytes = DEFAULT_MAX_IO_BYTES

    @property
    def verified(self) -> bool:
        return self.runs is not None

    def say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)


@dataclass
class Outcome:
    """What an optimize run produced: the bytes to write, the search result, the check that ran,
    and, when the input is kept as it is, why."""

    data: bytes
    result: Result
    verification: Verification | None
    unchanged: str | None = None  # why the input is written unchanged; None when it was rewritten
    target: int | None = None
    cost: Cost | None = None  # the written model's modelled cost on the run's board
    considered_costs: list[Cost] = field(default_factory=list)  # one per result.considered
    board: Board | None = None  # the board the costs are for
    # The written plan and, with Run.nearby, the next points of the trade-off, each with its
    # option (transforms/frontier.py nearby); empty when the input is written unchanged.
    nearby: list = field(default_factory=list)
    fits: str | None = None  # a sentence when the original already fits the board's arena region
    misfit: str | None = None  # a warning when the written arena does not fit that region
    # With Run.frontier: the plans no other beats (transforms/frontier.py), and what it noted.
    frontier: list | None = None
    frontier_notes: list[str] = field(default_factory=list)
    # The written plan on each region of the board, the model file's bytes, each operator's
    # modelled time and storage bytes by region (memory/usage.py): the memory table, --report's
    # "memory" and "operators", the lanes of --plot
    regions: list[RegionUse] = field(default_factory=list)
    model_bytes: ModelBytes | None = None
    operators: list[OpTime] = field(default_factory=list)
    traffic: list[OpTraffic] = field(default_factory=list)

    @property
    def target_met(self) -> bool:
        return self.target is None or self.result.plan.head <= self.target

    def report(self, model_name: str, output_name: str) -> dict:
        """The JSON report (docs/analysis_json.md)."""
        from .report.steps import report_dict

        d = report_dict(
            self.result,
            model_name,
            output_name,
            self.verification,
            target_bytes=self.target,
            unchanged=self.unchanged is not None,
            cost=self.cost,
            considered_costs=self.considered_costs,
            board=self.board,
        )
        d["memory"] = {
            "regions": [r.as_dict() for r in self.regions],
            "model": None if self.model_bytes is None else self.model_bytes.as_dict(),
        }
        d["operators"] = [t.as_dict() for t in self.operators]
        if self.unchanged is None:
            v = self.verification
            d["verification"] = (
                "UNVERIFIED: not checked in TFLM (--unverified)"
                if v is None
                else f"bit-identical to the original in TFLM ({v.describe()}) on {v.runs} random and "
                f"{v.edge_cases} edge-case inputs"
            )
        d["frontier"] = None if self.frontier is None else [p.as_dict() for p in self.frontier]
        return d


def target_fields(text: str | None) -> dict:
    """--target's value as Options fields: ``TARGET_MIN``, a size (sizes.parse_size: ValueError
    with the sentence when it is neither), or None, the default plan."""
    from .sizes import parse_size

    if text is None:
        return {}
    if str(text).strip().lower() == TARGET_MIN:
        return {"smallest": True}
    return {"target_bytes": text if isinstance(text, int) else parse_size(text)}


def fits_sentence(result: Result, board: Board) -> str | None:
    """One line when the original arena (head + tail estimate) fits the board's arena region."""
    p, arena = result.original, board.arena
    if p.total > arena.free:
        return None
    return (
        f"board {board.name}: the original already fits '{arena.name}' (head {p.head:,} B + tail "
        f"estimate {p.tail.total:,} B of {arena.free:,} B free)"
    )


def misfit_sentence(result: Result, board: Board) -> str | None:
    """A warning when the written arena (head + tail estimate) does not fit the board's arena
    region, with the head that would."""
    plan, arena = result.plan, board.arena
    if plan.total <= arena.free:
        return None
    return (
        f"warning: the arena (head {plan.head:,} B + tail estimate {plan.tail.total:,} B) does "
        f"not fit {board.name} '{arena.name}', which has {arena.free:,} B free: with this tail "
        f"the head must be at most {arena.free - plan.tail.total:,} B (--target)"
    )


def board_fit(graph: Graph, a: Analysis, run: Run) -> dict:
    """The ``board`` key of ``analyze --json``: does the arena fit the board's arena region, and
    the modelled compute time of the model as it is (memory/cost.py)."""
    from .memory.cost import Traffic

    region = run.board.arena
    cost = estimate(graph, Traffic(), run.board, run.options.kernel_set)
    return {
        "name": run.board.name,
        "arena_region": region.name,
        "arena_free": region.free,
        "fits": a.plan.total <= region.free,
        "compute_ms": round(cost.compute_s * 1e3, 3),
    }


def costs(graph: Graph, outcome: Outcome, run: Run, size: int) -> Outcome:
    """``outcome`` with the modelled cost of its model and of each strategy considered, on the
    run's board (memory/cost.py), and its memory report (memory/usage.py); ``graph`` is the input
    model, whose operators give the compute, ``size`` its file's bytes."""
    ks = run.options.kernel_set
    r = outcome.result
    outcome.board = run.board
    cost = outcome.cost = estimate(graph, r.traffic, run.board, ks, run.rate, uses=r.uses)
    outcome.considered_costs = [
        estimate(graph, c.traffic, run.board, ks, run.rate, uses=c.uses) for c in r.considered
    ]
    outcome.regions = region_usage(
        run.board, r.plan.head, r.plan.tail.total, cost.placement, cost.uses
    )
    written = r.graph if outcome.unchanged is None else graph
    outcome.model_bytes = ModelBytes(
        size, len(outcome.data), weight_bytes(graph), weight_bytes(written)
    )
    outcome.operators = op_times(written, cost, run.board, ks)
    outcome.traffic = op_traffic(written, cost, run.board)
    return outcome


def load(data: bytes, name: str, memo: Memo | None = None) -> Graph:
    """The model view of a file's bytes. Malformed files, and TinySeg operators whose kernels would
    refuse their options, are refused here, with one line. ``memo``: the run's (Run.memo)."""
    graph = build_graph(parse_model(data, name), name=name, memo=memo)
    bodies.validate_graph(graph)
    return graph


def analyze(graph: Graph, run: Run, stream: bool = False) -> tuple[Analysis, dict | None]:
    """The arena plan as TFLM commits it, and with ``stream`` the row-streaming estimate."""
    o = run.options
    a = analyze_graph(graph, o.kernel_set, o.build_profile)
    if not stream:
        return a, None
    from .transforms.passes import Rewrite
    from .transforms.passes.static import in_input_indices, static_shapes
    from .transforms.stream_search import choice_dict, choose_streaming

    # Streamed as optimize would: with static shapes first, indices told in the analysed model's.
    fixed = static_shapes(graph)
    g = fixed.graph if isinstance(fixed, Rewrite) else graph
    d = choice_dict(
        choose_streaming(g, o.kernel_set, o.build_profile, o.limits, stream_io=o.stream_io), g
    )
    if isinstance(fixed, Rewrite):
        d = in_input_indices(d, fixed, graph)
        d["static_shapes"] = fixed.detail
    return a, d


def refuse_unrunnable(graph: Graph, name: str, verified: bool) -> None:
    """Refuse, before any search, a model TFLM cannot run (with the reason and what to do)."""
    from .ir.validate import tflm_refusals, tinyseg_operators, unsupported

    ts = tinyseg_operators(graph)
    if ts:
        raise TinySegError(
            f"{name} already holds TinySeg operators ({shown(graph.operators[ts[0]].opcode)} at "
            f"operator {ts[0]}): give the original model"
        )
    refusals = [r for r in tflm_refusals(graph) if r.certain]  # the real load settles the rest
    fatal = [r for r in refusals if not r.missing]
    if fatal:  # before the layout checks: a Vela model's metadata is the NPU's, not TFLM's
        where = {"Prepare": " in Prepare", "Eval": " when it runs"}.get(fatal[0].stage, "")
        raise TinySegError(f"{name}: TFLM refuses the model{where}: {fatal[0]}")
    why = unsupported(graph) or offline_conflict(graph)
    if why:
        raise TinySegError(f"{name}: cannot be optimized: {why}")
    if refusals and verified:
        r = refusals[0]
        raise TinySegError(
            f"{name}: {r.what}, so the result cannot be verified in TFLM; {r.remedy}, or rerun with "
            "--unverified to write it unchecked (marked UNVERIFIED in the table and the report) once "
            "your firmware registers that kernel"
        )


def optimize(data: bytes, run: Run, name: str = "model", graph: Graph | None = None) -> Outcome:
    """Refusal checks, the search, the bit-exact check, in that order, then what the adapters
    print beside the plan: whether the arena fits the board, and with ``run.frontier`` the
    trade-off; raises TinySegError (with the exit code the command line returns) when the model
    cannot be optimized or fails its check. ``graph``: the view of ``data`` when the caller has
    loaded it already."""
    graph = graph if graph is not None else load(data, name, run.memo)
    out = _optimized(data, run, name, graph)
    if out.unchanged is None:
        out.misfit = misfit_sentence(out.result, run.board)
    if run.frontier:
        from .transforms.frontier import frontier

        run.say("the frontier: one search per step of the targeted search")
        out.frontier = frontier(
            graph,
            run.options,
            run.board,
            run.rate,
            out.nearby,
            notes=out.frontier_notes,
            progress=run.progress,
        )
    return out


def _optimized(data: bytes, run: Run, name: str, graph: Graph) -> Outcome:
    check_inline_fits(graph.model, name)
    o = run.options
    if run.keep_optimized:
        from .ir.validate import tinyseg_operators

        ts = tinyseg_operators(graph)
        if ts:
            plan = plan_graph(graph, o.kernel_set, o.build_profile)
            kept = Result(graph=graph, plan=plan, original=plan)
            why = (
                f"the model already holds TinySeg operators ({shown(graph.operators[ts[0]].opcode)} at "
                f"operator {ts[0]})"
            )
            return costs(graph, Outcome(data, kept, None, why, o.target_bytes), run, len(data))
    refuse_unrunnable(graph, name, run.verified)
    if o.target_bytes is not None:
        plan = plan_graph(graph, o.kernel_set, o.build_profile)
        if plan.head <= o.target_bytes:
            kept = Result(graph=graph, plan=plan, original=plan)
            why = f"the model already meets --target {o.target_bytes:,} B (head {plan.head:,} B)"
            return costs(graph, Outcome(data, kept, None, why, o.target_bytes), run, len(data))
    if run.verified:
        check_io_bytes(graph, name, run.max_io_bytes)  # before TFLM loads it with an arena to match
        try:
            interpreter.check_loads(
                model_to_bytes(graph.model),
                arena_for(graph),
                seconds=min(run.time_limit, interpreter.LOAD_SECONDS),
            )
        except TinySegError as exc:
            raise TinySegError(f"{name}: {exc}; nothing to optimize") from None
    started = time.monotonic()
    result = optimizer.search_plans(graph, o, run.progress, run.board)
    took = time.monotonic() - started  # the next points' searches take about as long
    if result.plan.head >= result.original.head and result.plan.total >= result.original.total:
        kept = Result(graph=graph, plan=result.original, original=result.original)
        why = f"no pass lowers the arena of {name} (head {result.original.head:,} B)"
        return costs(graph, Outcome(data, kept, None, why, o.target_bytes), run, len(data))
    verification = None
    if run.runs is not None:
        run.say(f"verifying against the original in TFLM ({run.runs} random inputs + 3 edge cases)")
        verification = check.verify(
            graph,
            result.graph,
            runs=run.runs,
            seconds=run.time_limit,
            tflm_dir=run.tflm_dir,
            progress=run.progress,
            max_io_bytes=run.max_io_bytes,
        )
        if not verification.identical:
            raise TinySegError(
                f"verification failed: {verification.detail}; no output written", EXIT_VERIFY_FAILED
            )
    out = Outcome(model_to_bytes(result.graph.model), result, verification, None, o.target_bytes)
    out.fits = fits_sentence(result, run.board)
    from .transforms.frontier import nearby, option_of, point

    if run.nearby:
        run.say("the next points of the trade-off: one search each")
        out.nearby = nearby(graph, o, result, run.board, run.rate, took)
    else:
        args = (o.kernel_set, run.board, run.rate, o.target_bytes, option_of(o), True)
        out.nearby = [point(graph, result, *args)]
    return costs(graph, out, run, len(data))


@dataclass(frozen=True)
class SideFiles:
    """The files optimize writes beside the model, each a path or None (not asked for)."""

    report: str | None = None
    plot: str | None = None
    csv: str | None = None  # a folder: regions.csv and operators.csv
    storage_header: str | None = None
    frontier_plot: str | None = None


def check_outputs(
    inputs: list[str],
    outputs: list[tuple[str, object]],
    csv_dir: str | None = None,
    force: bool = False,
) -> None:
    """Before any work: every output can be written, is none of the inputs (``-o`` may be, with
    ``force``) and is no other output (modelio.check_outputs). Every command that writes calls this."""
    from .ir.modelio import check_outputs as distinct
    from .ir.modelio import check_writable

    distinct(inputs, outputs, frozenset({"-o"}) if force else frozenset())
    for opt, path in outputs:
        if path is not None and opt != "--csv":
            check_writable(path)
    if csv_dir:
        check_writable(csv_dir, directory=True)


def check_side_files(
    model: str, output: str | None, side: SideFiles, run: Run, force: bool = False
) -> None:
    """Before the search: the outputs can be written and are distinct, and a storage header's
    board has a map the header can follow. ``output`` None: the caller writes the model."""
    from pathlib import Path

    from .report.steps import OPTIMIZE_CSV_NAMES

    check_outputs(
        [model],
        [
            ("-o", output),
            ("--report", side.report),
            ("--plot", side.plot),
            ("--frontier-plot", side.frontier_plot),
            ("--storage-header", side.storage_header),
        ]
        + [("--csv", Path(side.csv) / name) for name in OPTIMIZE_CSV_NAMES if side.csv],
        csv_dir=side.csv,
        force=force,
    )
    if side.storage_header:
        from .deploy.storage_header import check_board

        check_board(run.board)


def side_files(
    out: Outcome, run: Run, side: SideFiles, model: str, output: str
) -> list[tuple[str, bytes]]:
    """The bytes of each file ``side`` asks for, by path; ``model`` and ``output`` are the
    names the report and the pictures give the input and the written model."""
    from pathlib import Path

    files: list[tuple[str, bytes]] = []
    if side.csv:
        from .report.steps import OPTIMIZE_CSV_NAMES, optimize_csv_files

        made = optimize_csv_files(out.regions, out.operators)
        files += [(str(Path(side.csv) / name), made[name]) for name in OPTIMIZE_CSV_NAMES]
    if side.report:
        report = out.report(model, output)
        files.append((side.report, (json.dumps(report, indent=1) + "\n").encode()))
    if side.storage_header:
        from .deploy.storage_header import plan_header

        # The output's file name only: the header's bytes do not depend on the folder.
        board = shown(run.board.name, 0)
        text = plan_header(
            out.cost,
            run.board,
            f"{shown(Path(output).name, 0)} (tinyseg optimize --board {board})",
        )
        files.append((side.storage_header, text.encode()))
    if side.frontier_plot:
        from .report.plots import frontier_png

        title = f"{shown(model)} on {run.board.name}: head against modelled latency"
        files.append((side.frontier_plot, frontier_png(out.frontier, title)))
    if side.plot:
        head = out.result.plan.head
        title = f"{shown(output)}: head {head:,} B ({run.options.kernel_set})"
        files.append((side.plot, plan_picture(out, title)))
    return files


def plan_picture(out: Outcome, title: str) -> bytes:
    """The written plan as a PNG (``picture_parts``; the plot is an adapter over them)."""
    from .report.plots import plan_png

    a, lanes = picture_parts(out)
    return plan_png(a, title, lanes)


def picture_parts(out: Outcome):
    """What the written plan's picture draws: the analysis of its arena, and under it each
    operator's modelled time and storage bytes by region, the rows --report's ``operators`` and
    ``cost`` hold (report/plots.py ``CostLanes``)."""
    from .report.plots import CostLanes

    o_plan = out.result.plan
    a = analyze_graph(out.result.graph, o_plan.kernel_set, o_plan.build_profile, o_plan)
    return a, CostLanes(out.operators, out.traffic, out.cost.regions if out.cost else ())
