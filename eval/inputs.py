"""Check every input of a run before anything is written, collecting all problems at once.

Each ``resolve_*`` returns (value or None, problems); eval/runner.py raises one
EvalInputError with every problem, so a user fixes a command line in one pass.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common.config import ConfigError, KeyValueError, parse_key_value
from bench.constants import AXES, GRANULARITIES, OVERALL, SUBSETS
from bench.format import Benchmark, BenchmarkError, load_benchmark
from bench.protocol import ProtocolConfig, check_settings, parse_settings
from eval.adapters.base import ModelAdapter
from eval.adapters.registry import build_model
from eval.errors import RunError
from eval.summary import SUMMARY

AXIS_KEYS = (*AXES, OVERALL)
GRANULARITY_KEYS = (*GRANULARITIES, "all")


def parse_model_args(items: list[str] | None, flag: str = "--model-arg") -> tuple[dict[str, Any], list[str]]:
    """``["k=v", ...]`` -> {k: YAML-parsed v}; problems for items that are not key=value."""
    args, problems = {}, []
    for item in items or []:
        try:
            key, value = parse_key_value(item)
        except KeyValueError as err:
            why = "cannot parse the value" if err.kind == "value" else "expected key=value"
            problems.append(f"ERROR {flag} {item!r}: {why}")
            continue
        args[key] = value
    return args, problems


def resolve_benchmark(bench: str | Path | Benchmark) -> tuple[Benchmark | None, list[str]]:
    if isinstance(bench, Benchmark):
        return bench, []
    try:
        return load_benchmark(bench), []
    except BenchmarkError as err:
        return None, [p.line() for p in err.problems]


def resolve_model(model: str | ModelAdapter | None, args: dict | None,
                  flag: str = "--model") -> tuple[ModelAdapter | None, list[str], list[str]]:
    """(adapter or None, bad-argument problems, bad-data problems such as an unreadable checkpoint)."""
    if model is None or isinstance(model, ModelAdapter):
        if args:
            return None, [f"ERROR {flag}-arg: arguments given for an adapter instance; pass them to its constructor"], []
        return model, [], []
    try:
        return build_model(model, args), [], []
    except KeyError as err:
        return None, [f"ERROR {flag}: {err.args[0]}"], []
    except ConfigError as err:
        return None, [f"ERROR {flag}-arg ({model}): {err}"], []
    except RunError as err:  # the arguments are fine, a file they name is not
        return None, [], [f"ERROR {flag} {model}: {err}"]
    except (ValueError, TypeError, ImportError, OSError) as err:  # the adapter refused its arguments
        return None, [f"ERROR {flag} {model}: cannot build the adapter: {err}"], []


def resolve_settings(settings: str | list[str] | None, protocol: ProtocolConfig) -> tuple[list[str], list[str]]:
    names = parse_settings(settings)
    return names, [f"ERROR --settings: {p}" for p in check_settings(names, protocol)]


def check_numbers(limit: int | None, batch_size: int, n_boot: int, max_extra: dict) -> list[str]:
    problems = []
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        problems.append(f"ERROR --limit: must be a positive integer, got {limit!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        problems.append(f"ERROR --batch-size: must be a positive integer, got {batch_size!r}")
    if not isinstance(n_boot, int) or n_boot < 10:
        problems.append(f"ERROR --n-boot: must be an integer >= 10, got {n_boot!r}")
    for subset, k in max_extra.items():
        if subset not in SUBSETS or not isinstance(k, int) or k < 0:
            problems.append(f"ERROR max_extra: {subset}={k!r}; expected SVS/MVN and a non-negative integer")
    return problems


def resolve_blind(path: str | Path | None) -> tuple[dict | None, list[str]]:
    """The by_axis_granularity table of an earlier (text-only) run, for the Blind row."""
    if path is None:
        return None, []
    file = Path(path) / SUMMARY
    try:
        summary = json.loads(file.read_text())
        table = summary["by_axis_granularity"]
        if not isinstance(table, dict):
            raise TypeError("by_axis_granularity is not an object")
    except (OSError, ValueError, KeyError, TypeError) as err:
        return None, [f"ERROR --blind-run {path}: no usable {SUMMARY} ({type(err).__name__}: {err})"]
    return {"by_axis_granularity": table, "acc": summary.get("acc", {}),
            "model": summary.get("run", {}).get("model", "blind")}, []


def resolve_human(path: str | Path | None) -> tuple[dict | None, list[str]]:
    """Human accuracies, in points: {"spatial": {"coarse": 92.1, "fine": ..., "all": ...}, ...}."""
    if path is None:
        return None, []
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        return None, [f"ERROR --human-json {path}: cannot read ({type(err).__name__}: {err})"]
    problems = []
    if not isinstance(data, dict):
        return None, [f"ERROR --human-json {path}: top level must be an object {{axis: {{granularity: points}}}}"]
    for axis, row in data.items():
        if axis not in AXIS_KEYS or not isinstance(row, dict):
            problems.append(f"ERROR --human-json {path}:{axis}: expected one of {list(AXIS_KEYS)} mapping to an object")
            continue
        for gran, value in row.items():
            if gran not in GRANULARITY_KEYS:
                problems.append(f"ERROR --human-json {path}:{axis}.{gran}: expected one of {list(GRANULARITY_KEYS)}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
                problems.append(f"ERROR --human-json {path}:{axis}.{gran}: must be a number of points in [0, 100]")
    return (None if problems else {"by_axis_granularity": data}), problems
