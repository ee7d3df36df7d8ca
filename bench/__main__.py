"""``python -m bench {validate,stats,schema,generate,check,export,import}``."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys

from bench.format import validate_benchmark


def _validate(args: argparse.Namespace) -> int:
    status = 0
    for path in args.dirs:
        problems, bench = validate_benchmark(path, check_images=not args.no_images)
        for problem in problems:
            print(problem.line())
        if problems:
            status = 1
            print(f"{path}: {len(problems)} problem(s)", file=sys.stderr)
        else:
            print(f"{path}: OK ({len(bench.samples)} samples)", file=sys.stderr)
    return status


def _stats(args: argparse.Namespace) -> int:
    from bench.stats import benchmark_stats, format_stats
    problems, bench = validate_benchmark(args.dir, check_images=False)
    if problems:
        for problem in problems:
            print(problem.line())
        return 1
    stats = benchmark_stats(bench)
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0


def _schema(args: argparse.Namespace) -> int:
    from bench.schema import benchmark_schema, sample_schema
    print(json.dumps(sample_schema() if args.sample else benchmark_schema(), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Benchmark format tools and the synthetic generator.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="validate benchmark folders; exit 1 and one ERROR line per problem")
    p.add_argument("dirs", nargs="+", help="benchmark folders (or benchmark.json/.jsonl files)")
    p.add_argument("--no-images", action="store_true", help="skip opening the images")
    p.set_defaults(func=_validate)
    p = sub.add_parser("stats", help="counts per task, subset, axis x granularity, letters, views, frames")
    p.add_argument("dir")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_stats)
    p = sub.add_parser("schema", help="print the JSON Schema of the format")
    p.add_argument("--sample", action="store_true", help="the schema of one sample instead of the file")
    p.set_defaults(func=_schema)
    if importlib.util.find_spec("bench.synth.cli") is not None:
        from bench.synth import cli as synth_cli
        synth_cli.add_generate_parser(sub)
        synth_cli.add_check_parser(sub)
    from bench.transfer_cli import add_transfer_parsers
    add_transfer_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
