"""``python -m eval import {lmms-eval,vlmevalkit}`` (wired in by eval/__main__.py)."""
from __future__ import annotations

import argparse
from pathlib import Path


def cmd_import(args: argparse.Namespace) -> int:
    from eval.import_harness import import_harness
    from eval.report import render_ssmn_table
    from eval.settings import ProtocolConfig
    protocol = ProtocolConfig(max_extra={"SVS": args.max_extra_svs, "MVN": args.max_extra_mvn}, minus_one=args.minus_one)
    summary = import_harness(args.harness, args.files, args.bench, args.out, model=args.model, settings=args.settings,
                             seed=args.seed, protocol=protocol, n_boot=args.n_boot, plots=not args.no_plots,
                             overwrite=args.overwrite)
    print(render_ssmn_table([(summary["run"]["model"], summary)]))
    print(f"wrote {Path(args.out) / 'report.md'}")
    return 0


def add_import_parser(subparsers) -> None:
    imp = subparsers.add_parser("import", help="score lmms-eval / VLMEvalKit outputs with this protocol")
    imp.add_argument("harness", choices=("lmms-eval", "vlmevalkit"))
    imp.add_argument("files", nargs="+",
                     help="lmms-eval: samples .jsonl (one per task is fine); vlmevalkit: prediction .xlsx/.tsv/.json")
    imp.add_argument("--bench", required=True, help="the benchmark folder the export was made from")
    imp.add_argument("--out", required=True, help="run folder to write")
    imp.add_argument("--model", default=None, help="model name of the run (default: harness:file stem)")
    imp.add_argument("--settings", default=None, help="as given to `bench export` (default: all that apply)")
    imp.add_argument("--seed", type=int, default=0, help="as given to `bench export`")
    imp.add_argument("--max-extra-svs", type=int, default=3)
    imp.add_argument("--max-extra-mvn", type=int, default=2)
    imp.add_argument("--minus-one", choices=("each", "seeded"), default="each")
    imp.add_argument("--n-boot", type=int, default=1000)
    imp.add_argument("--no-plots", action="store_true")
    imp.add_argument("--overwrite", action="store_true", help="replace a non-empty --out that is not an import")
    imp.set_defaults(func=cmd_import)
