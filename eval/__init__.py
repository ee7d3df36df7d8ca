"""The benchmark protocol and evaluator: ``python -m eval ...`` or ``evaluate(...)``.

See eval/README.md for the commands, the summary.json keys and how to add a model.
"""
from eval.errors import EvalInputError
from eval.report import render_cvbench_table, render_report, render_ssmn_table
from eval.runner import evaluate, finish
from eval.settings import ProtocolConfig

__all__ = ["EvalInputError", "ProtocolConfig", "evaluate", "finish", "render_cvbench_table", "render_report",
           "render_ssmn_table"]
