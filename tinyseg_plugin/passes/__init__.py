"""Graph-to-graph passes. Each takes a Graph and returns a new Graph over an edited copy of
the model (the input is never changed), or None when it does not apply."""
