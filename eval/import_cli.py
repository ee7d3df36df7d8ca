"""``python -m eval import {lmms-eval,vlmevalkit}`` (wired in by eval/__main__.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

from bench.constants import DEFAULT_N_BOOT
from bench.protocol import add_protocol_arguments


def cmd_import(args: argparse.Namespace) -> int:
    from bench.protocol import protocol_from_arguments
    from eval.import_harness import import_harness
    from eval.report import render_ssmn_table
    protocol = protocol_from_arguments(args)
    summary = import_harness(args.harness, args.files, args.bench, args.out, model=args.model, settings=args.settings,
                             seed=args.seed, protocol=protocol, n_boot=args.n_boot, plots=not args.no_plots,
                             overwrite=args.overwrite)
    print(render_ssmn_table([(summary["run"]["model"], summary)]))
    print(f"wrote {Path(args.out) / 'report.md'}")
    return 0


def add_import_parser(subparsers, parents=()) -> None:
    imp = subparsers.add_parser("import", help="score lmms-eval / VLMEvalKit outputs with this protocol",
                                parents=list(parents))
    imp.add_argument("harness", choices=("lmms-eval", "vlmevalkit"))
    imp.add_argument("files", nargs="+",
                     help="lmms-eval: samples .jsonl (one per task is fine); vlmevalkit: prediction .xlsx/.tsv/.json")
    imp.add_argument("--bench", required=True, help="the benchmark folder the export was made from")
    imp.add_argument("--out", required=True, help="run folder to write")
    imp.add_argument("--model", default=None, help="model name of the run (default: harness:file stem)")
    imp.add_argument("--settings", default=None, help="as given to `bench export` (default: all that apply)")
    imp.add_argument("--seed", type=int, default=0, help="as given to `bench export`")
    add_protocol_arguments(imp)
    imp.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates for the 95%% intervals")
    imp.add_argument("--no-plots", action="store_true")
    imp.add_argument("--overwrite", action="store_true", help="replace a non-empty --out that is not an import")
    imp.set_defaults(func=cmd_import)
