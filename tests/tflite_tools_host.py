"""A stand-in for the patched tflite-tools host: the same hook specifications, driven through pluggy.

It mirrors patches/tflite-tools (tflite_tools/hookspecs.py there): a PluginManager for project
"tflite_tools" that loads plugins from the "tflite_tools" entry-point group (here: registered directly).
tests/test_tflite_tools_patch.py checks the real host against a tflite-tools checkout.
"""

from __future__ import annotations

import argparse

import pluggy

hookspec = pluggy.HookspecMarker("tflite_tools")


class HostSpec:
    @hookspec
    def tflite_tools_add_options(
        self, parser: argparse.ArgumentParser, command: str | None
    ) -> None:
        """Add the plugin's command-line options to the host's parser."""

    @hookspec
    def tflite_tools_check_options(self, options: argparse.Namespace, command: str | None) -> None:
        """Refuse bad option values (ValueError) before the model is read."""

    @hookspec(firstresult=True)
    def tflite_tools_describe_operator(
        self,
        op_id: int,
        custom_code: str,
        inputs: list[int],
        outputs: list[int],
        custom_options: bytes,
        shapes: list[list[int]],
    ) -> dict | None:
        """Describe a custom operator: {"type", "inputs", "outputs", "macs" (optional)}."""

    @hookspec(firstresult=True)
    def tflite_tools_optimize(self, model: bytes, options: argparse.Namespace) -> bytes | None:
        """Called with the reordered model; return a rewritten model or None."""

    @hookspec
    def tflite_tools_analysis(self, model: bytes, options: argparse.Namespace) -> dict | None:
        """Contribute a section to the host's analysis report."""


def manager(*plugins) -> pluggy.PluginManager:
    pm = pluggy.PluginManager("tflite_tools")
    pm.add_hookspecs(HostSpec)
    for p in plugins:
        pm.register(p)
    return pm


def parse(
    pm: pluggy.PluginManager, argv: list[str], command: str | None = "optimize"
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"tflite-tools {command}", allow_abbrev=False)
    parser.add_argument("-i", "--input")
    parser.add_argument("-o", "--output")
    pm.hook.tflite_tools_add_options(parser=parser, command=command)
    args = parser.parse_args(argv)
    pm.hook.tflite_tools_check_options(options=args, command=command)
    return args


def run_optimize(
    pm: pluggy.PluginManager, model: bytes, argv: list[str]
) -> tuple[bytes, list[dict]]:
    """What `tflite-tools optimize --plugin tinyseg` does after its reorder pass (here the identity).

    A plugin's ValueError with a ``model`` attribute (a result written but short of the goal) propagates,
    as the host reports it after writing that model."""
    args = parse(pm, argv)
    reordered = model
    rewritten = pm.hook.tflite_tools_optimize(model=reordered, options=args)
    final = rewritten if rewritten is not None else reordered
    return final, [s for s in pm.hook.tflite_tools_analysis(model=final, options=args) if s]


def describe_all(pm: pluggy.PluginManager, model: bytes) -> list[dict | None]:
    """The host's reader: ask the plugins about every custom operator of subgraph 0."""
    from tinyseg_plugin.ir.modelio import parse_model

    m = parse_model(model)
    sg = m.subgraphs[0]
    out = []
    for i, op in enumerate(sg.operators):
        code = m.operatorCodes[op.opcodeIndex]
        if code.customCode is None:
            continue
        name = (
            code.customCode.decode() if isinstance(code.customCode, bytes) else str(code.customCode)
        )
        out.append(
            pm.hook.tflite_tools_describe_operator(
                op_id=i,
                custom_code=name,
                inputs=[int(t) for t in op.inputs],
                outputs=[int(t) for t in (op.outputs if op.outputs is not None else [])],
                custom_options=bytes(op.customOptions) if op.customOptions is not None else b"",
                shapes=[
                    [int(d) for d in (t.shape if t.shape is not None else [])] for t in sg.tensors
                ],
            )
        )
    return out
