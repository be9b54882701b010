"""Adapters of results to people: the analysis as tables and CSV, the optimizer's step table
and report, the plots."""
