"""A stand-in for the patched tflite-tools host: the same hook specifications, driven through pluggy.

It mirrors patches/tflite-tools: a PluginManager for project "tflite_tools" that loads plugins from
the "tflite_tools" entry-point group (here: registered directly) and enables those named.
"""
from __future__ import annotations

import argparse

import pluggy

hookspec = pluggy.HookspecMarker("tflite_tools")


class HostSpec:
    @hookspec
    def tflite_tools_add_options(self, parser: argparse.ArgumentParser) -> None:
        """Add the plugin's command-line options to the host's parser."""

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


def run_optimize(pm: pluggy.PluginManager, model: bytes, argv: list[str]) -> tuple[bytes, list[dict]]:
    """What `tflite-tools optimize --plugin tinyseg` does after its reorder pass (here the identity)."""
    parser = argparse.ArgumentParser(prog="tflite-tools optimize")
    parser.add_argument("-i", "--input")
    parser.add_argument("-o", "--output")
    pm.hook.tflite_tools_add_options(parser=parser)
    args = parser.parse_args(argv)
    reordered = model
    rewritten = pm.hook.tflite_tools_optimize(model=reordered, options=args)
    final = rewritten if rewritten is not None else reordered
    return final, [s for s in pm.hook.tflite_tools_analysis(model=final, options=args) if s]
