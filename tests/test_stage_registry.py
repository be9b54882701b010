"""The stage registry (tinyseg_plugin/contract/stages/) and the StreamChain kernel list the same
stages: kStages' (StageOp, Rows) pairs in tflm_ops/kernels/tinyseg_stream.cc, read from its text
without a compiler, are the registry's (operator, row type) keys, each once; so are the generated
header's kStageKeys (the kernel static_asserts the same). The checker is fed doctored copies to
show it can fail. The kernels take the operators' names from the generated header only."""

from __future__ import annotations

import re

from conftest import ROOT

from tinyseg_plugin.contract import customops, stages

KERNELS = ROOT / "tflm_ops" / "kernels"
STREAM = KERNELS / "tinyseg_stream.cc"
HEADER = KERNELS / "tinyseg_contract.h"
ENTRY = re.compile(r"\{\s*StageOp::(k\w+)\s*,\s*Rows::(k\w+)\s*[,}]")


def _cname(name: str) -> str:
    """The C++ enum spelling of an operator or a row type (header.py's)."""
    return "k" + "".join(part.capitalize() for part in name.split("_"))


def table_keys(text: str, table: str) -> list[tuple[str, str]]:
    """The (operator, row type) pairs of the C++ array ``table``'s initializer in ``text``, in
    the registry's spelling (a name the registry does not know stays as C++ spells it)."""
    found = re.search(rf"\b{table}\[\]\s*=\s*\{{(.*?)\n\}};", text, re.S)
    assert found, f"no initializer of {table}[] in the text"
    ops = {_cname(op): op for op in stages.by_op()}
    rows = {_cname(r): r for r in stages.ROWS}
    body = re.sub(r"//[^\n]*", "", found.group(1))
    return [(ops.get(op, op), rows.get(r, r)) for op, r in ENTRY.findall(body)]


def key_differences(found: list[tuple[str, str]]) -> list[str]:
    """What differs between a C++ table's keys and the registry's: each one missing, extra or
    listed twice (empty: they agree)."""
    registry = stages.keys()
    problems = [
        f"{op} on {rows} rows: not in the table" for op, rows in registry if (op, rows) not in found
    ]
    problems += [
        f"{op} on {rows} rows: not in the registry"
        for op, rows in found
        if (op, rows) not in registry
    ]
    problems += [
        f"{op} on {rows} rows: listed {found.count((op, rows))} times"
        for op, rows in dict.fromkeys(found)
        if found.count((op, rows)) > 1
    ]
    return problems


def test_kernel_stages_are_the_registry() -> None:
    found = table_keys(STREAM.read_text(), "kStages")
    assert len(found) == len(stages.STAGES)
    assert key_differences(found) == []


def test_header_stage_keys_are_the_registry_in_order() -> None:
    assert table_keys(HEADER.read_text(), "kStageKeys") == list(stages.keys())
    assert f"constexpr int32_t kNumStageKeys = {len(stages.STAGES)};" in HEADER.read_text()


def test_the_check_reports_a_stage_removed_added_or_twice() -> None:
    text = STREAM.read_text()
    removed = text.replace(
        "    {StageOp::kElu, Rows::kFloat32, PrepareEluFloat, EluFloatRow},\n", ""
    )
    assert removed != text
    assert key_differences(table_keys(removed, "kStages")) == [
        "ELU on float32 rows: not in the table"
    ]
    line = "    {StageOp::kMean, Rows::kQuantized, PrepareMean, MeanRow},"
    assert line in text
    added = text.replace(
        line, line + "\n    {StageOp::kHardSwish, Rows::kInt16, PrepareHardSwish, HardSwishRow},"
    )
    assert key_differences(table_keys(added, "kStages")) == [
        "HARD_SWISH on int16 rows: not in the registry"
    ]
    twice = text.replace(line, line + "\n" + line)
    assert key_differences(table_keys(twice, "kStages")) == [
        "MEAN on quantized rows: listed 2 times"
    ]
    unknown = text.replace(
        line, line + "\n    {StageOp::kGelu, Rows::kQuantized, PrepareGelu, GeluRow},"
    )
    assert key_differences(table_keys(unknown, "kStages")) == [
        "kGelu on quantized rows: not in the registry"
    ]


def test_registry_records_are_unique_and_agree_per_operator() -> None:
    assert len(set(stages.keys())) == len(stages.STAGES)
    for s in stages.STAGES:
        first = stages.by_op()[s.op]
        assert (s.activations, s.per_channel, s.lookup_table, s.accumulates) == (
            first.activations,
            first.per_channel,
            first.lookup_table,
            first.accumulates,
        ), (
            f"{s.op} on {s.rows} rows: its operands or persistent data differ from its {first.rows} record"
        )
        assert stages.find(s.op, s.rows) is s
    assert stages.find("HARD_SWISH", "int16") is None
    # every operator has an int8 stage (STREAM_STAGE_OPS lists them all)
    assert {s.op for s in stages.STAGES} == {s.op for s in stages.STAGES if s.rows == "quantized"}


def test_each_conversion_is_on_the_row_type_the_kernel_picks() -> None:
    for s in stages.STAGES:
        assert bool(s.converts) == (s.op in ("QUANTIZE", "DEQUANTIZE")), s
        for a, b in s.converts:
            assert stages.rows_of(a, b) == s.rows, f"{s.op} {a} -> {b} is on {s.rows} rows"


def test_a_record_outside_the_row_types_or_families_is_refused() -> None:
    for bad in (dict(rows="int4", family="conv"), dict(rows="int16", family="gelu")):
        try:
            stages.Stage("CONV_2D", **bad)
        except ValueError as exc:
            assert "CONV_2D" in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")


def test_customops_tables_are_read_from_the_registry() -> None:
    """The tables other modules read hold what the records say, for every row type."""
    assert set(customops.STREAM_STAGE_OPS) == {s.op for s in stages.STAGES}
    assert set(customops.STREAM_FLOAT32_STAGE_OPS) | {"QUANTIZE"} == {
        s.op for s in stages.STAGES if s.rows == "float32"
    }
    assert (
        customops.STREAM_INT16_STAGE_CONSTANTS["TRANSPOSE_CONV"]
        == stages.find("TRANSPOSE_CONV", "int16").constants
    )
    assert ("FLOAT32", "INT16") in customops.STREAM_QUANTIZE_TYPES
    assert customops.STREAM_PER_CHANNEL_OPS == ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV")


OP_NAMES = (customops.SPILL, customops.FETCHING, customops.FETCHING_CONV_2D, customops.STREAM_CHAIN)


def spelled_names(text: str) -> list[str]:
    """Operator names or a contract version a C++ file spells itself rather than take from the
    generated header."""
    found = [n for n in OP_NAMES if f'"{n}"' in text]
    found += re.findall(r"kTinySegContractVersion\s*=\s*\d+", text)
    return found


def test_kernels_take_operator_names_and_version_from_the_header() -> None:
    for src in sorted(KERNELS.glob("*.[ch]*")):
        if src.name != HEADER.name:
            assert spelled_names(src.read_text()) == [], src.name
    ops_h = (KERNELS / "tinyseg_ops.h").read_text()
    assert "kTinySegContractVersion = tinyseg_ops::contract::kVersion;" in ops_h
    assert "kTinySegOpCount = tinyseg_ops::contract::kOpCount;" in ops_h
    assert f"kOpCount = {len(customops.TINYSEG_OPS)};" in HEADER.read_text()
    assert spelled_names('constexpr char kOp[] = "Spill";') == ["Spill"]
    assert spelled_names("constexpr int kTinySegContractVersion = 1;") == [
        "kTinySegContractVersion = 1"
    ]


def test_each_operator_has_one_rule_and_the_switches_cover_every_rule() -> None:
    """The records of one operator agree on their rule (body check, admission and row map are
    picked by it), every rule has a row map and a body check, and an estimated operator has no
    stage."""
    from tinyseg_plugin.contract import bodies
    from tinyseg_plugin.transforms import stream

    for s in stages.STAGES:
        first = stages.by_op()[s.op]
        assert (s.rule, s.same_shape, s.alpha, s.reads_whole) == (
            first.rule,
            first.same_shape,
            first.alpha,
            first.reads_whole,
        ), s
        assert s.row_rule in ("identity", "windowed", "upsampling", "padding", "accumulating")
    assert set(bodies._RULE_CHECKS) == set(stages.RULES)
    assert set(stream._ROW_MAPS) | {"mean"} == set(stages.RULES)
    assert not set(stages.ESTIMATED) & {s.op for s in stages.STAGES}
    assert stream.ROW_LOCAL == {s.op for s in stages.STAGES} | set(stages.ESTIMATED)
    try:
        stages.Stage("CONV_2D", "int16", "conv", rule="gelu")
    except ValueError as exc:
        assert "gelu" in str(exc)
    else:
        raise AssertionError("a record with an unknown rule accepted")


def test_no_int16_stage_of_an_operator_tflm_computes_on_float32_and_int8_only() -> None:
    """ir/validate.py's FLOAT32_INT8_ONLY lists TFLM's own kernels' types (every operator the
    interpreter runs, streamed or not), so it stays there; the registry must not hold an int16
    stage TFLM's kernel refuses, or a streamed model would compute what TFLM cannot."""
    from tinyseg_plugin.ir.validate import FLOAT32_INT8_ONLY

    for op in FLOAT32_INT8_ONLY:
        assert stages.find(op, "int16") is None, op
