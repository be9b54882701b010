"""Transforms and search: the passes (graph to graph), the strategies that choose among them,
row streaming. Imports memory/, ir/ and contract/."""
