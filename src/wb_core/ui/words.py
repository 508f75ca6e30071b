"""The dashboard's words: the names the whole workbench uses (see wb_core.analysis.words)."""

from wb_core.faces import LABELS, MODES, executed_words, label, plural, results_table, rounded, run_name, worded

__all__ = ["LABELS", "MODES", "executed_words", "label", "plural", "results_table", "rounded", "run_name", "worded"]
