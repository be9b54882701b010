"""Placeholder, replaced below."""
def is_tinyseg_op(op): return False
