"""The custom-operator contract shared with the C++ runtime: operator names, options and their
codec, limits, the check of each operator against its graph, and the generated C++ header.
Imports nothing of the package but errors.py."""
