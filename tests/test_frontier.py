"""--frontier on Tiny U-Net: the plans the targeted search writes that no other found plan beats
in head, modelled latency and flash written, each written again, head and traffic, by its option."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TINY_UNET

from tinyseg_plugin import pipeline
from tinyseg_plugin.memory.boards import load_board
from tinyseg_plugin.report.steps import frontier_lines
from tinyseg_plugin.transforms.frontier import FrontierPoint, dominates, frontier
from tinyseg_plugin.transforms.optimizer import Options


def _fields(option: str) -> dict:
    """A point's option as Options fields (the command line's --target)."""
    return pipeline.target_fields(option.split()[-1] if option else None)


@pytest.fixture(scope="module")
def points() -> list[FrontierPoint]:
    graph = pipeline.load(TINY_UNET.read_bytes(), "tiny_unet")
    return frontier(graph, Options(), load_board("generic"))


def test_the_frontier_holds_a_free_plan_and_a_small_one(points: list[FrontierPoint]) -> None:
    """A plan moving nothing at head <= 153,248 B; one at head <= 49,440 B moving <= 345,600 B."""
    assert any(p.bytes_moved == 0 and p.head <= 153_248 for p in points), points
    assert any(p.head <= 49_440 and p.bytes_moved <= 345_600 for p in points), points
    assert sum(p.original for p in points) == 1
    assert min(p.head for p in points) == next(p.head for p in points if p.option == "--target min")


def test_no_listed_plan_beats_another(points: list[FrontierPoint]) -> None:
    # the input is listed as a reference; the default plan, ranked by the total, as a choice
    plans = [p for p in points if not p.original and p.option]
    for p in plans:
        assert not [q for q in plans if dominates(q, p)], p
    figures = [p.figures for p in points]
    assert len(set(figures)) == len(figures)


def test_every_point_is_written_again_by_its_option(
    points: list[FrontierPoint], tiny_unet: Path
) -> None:
    data = tiny_unet.read_bytes()
    for p in points:
        run = pipeline.Run(Options(**_fields(p.option)), runs=None, nearby=False)
        out = pipeline.optimize(data, run, "tiny_unet")
        t = out.result.traffic
        assert (out.result.plan.head, (t.written, t.read)) == (p.head, p.traffic), p.option
        assert (out.unchanged is not None) == p.original, p.option


def test_the_table_fits_100_columns(points: list[FrontierPoint]) -> None:
    lines = frontier_lines(points, "generic")
    assert len(lines) == len(points) + 2
    assert max(len(line) for line in lines) <= 100, lines
    assert "--target min" in "\n".join(lines) and "no --target" in "\n".join(lines)


def test_a_walk_cut_short_says_where_it_stopped() -> None:
    graph = pipeline.load(TINY_UNET.read_bytes(), "tiny_unet")
    notes: list[str] = []
    heard: list[str] = []
    points = frontier(
        graph, Options(), load_board("generic"), searches=2, notes=notes, progress=heard.append
    )
    assert len(notes) == 2 and "after 2 searches" in notes[0], notes
    # one progress line per step, counted against the cap, with the head it reached
    assert [line.split(" (")[0] for line in heard] == ["frontier step 1", "frontier step 2"]
    assert all("(at most 2)" in line and " s a step" in line for line in heard), heard
    head = int(notes[0].split("head ")[1].split(" B")[0].replace(",", ""))
    assert f"--target {head - 1} continues it" in notes[1]
    assert max(len(line) for line in notes) <= 100
    assert {p.option for p in points} >= {"", "--target min"}
