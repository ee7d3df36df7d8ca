"""Command line: ``python -m eval run|finish|compare|report|models|browse|import|ood``. See eval/README.md."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from common.atomic import atomic_write_text
from bench.constants import DEFAULT_N_BOOT
from bench.protocol import add_protocol_arguments
from eval.errors import DATA, EvalInputError, RunError, describe_failure

os.environ.setdefault("MPLBACKEND", "Agg")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m eval", description="Run and compare benchmark evaluations.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="evaluate a model with the full protocol", parents=[common])
    run.add_argument("--bench", required=True, help="benchmark folder (or benchmark.json / .jsonl)")
    run.add_argument("--model", required=True, help="registered adapter name (python -m eval models)")
    run.add_argument("--model-arg", action="append", default=[], metavar="K=V", help="adapter argument; repeatable")
    run.add_argument("--out", required=True, help="run folder; rerunning the same command continues it")
    run.add_argument("--settings", default=None,
                     help="comma list of +0,+1,+2,+3,-1,all (default: all that apply); write --settings=-1,+0 "
                          "when the list starts with -1")
    run.add_argument("--limit", type=int, default=None, help="only the first N samples")
    run.add_argument("--circular", action="store_true", help="rotate options (NOTA stays last); all must be right")
    run.add_argument("--seed", type=int, default=0, help="seeds view orders, the seeded -1 choice and the bootstrap")
    run.add_argument("--batch-size", type=int, default=8, help="requests per model call and per flush")
    run.add_argument("--fallback", default=None, help="adapter that maps unreadable answers to a letter")
    run.add_argument("--fallback-arg", action="append", default=[], metavar="K=V")
    add_protocol_arguments(run)
    run.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates for the 95%% intervals")
    run.add_argument("--blind-run", default=None, help="folder of an earlier text-only run: the Blind row")
    run.add_argument("--human-json", default=None, help='human accuracies {"spatial": {"coarse": 91.0, ...}}')
    run.add_argument("--shard", default=None, metavar="R/N",
                     help="answer only shard R of N of the queries (default under torchrun / accelerate launch: "
                          "RANK/WORLD_SIZE); the last shard to finish, or `finish`, writes the summary")
    run.add_argument("--wait", action="store_true",
                     help="if another run is writing --out, wait for it to finish (default: stop at once)")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--no-plots", action="store_true")

    fin = sub.add_parser("finish", help="merge a sharded run's predictions and write its summary", parents=[common])
    fin.add_argument("run", help="run folder")
    fin.add_argument("--n-boot", type=int, default=None, help="default: the run's own")
    fin.add_argument("--no-plots", action="store_true")
    fin.add_argument("--wait", action="store_true", help="wait for shards still writing the folder")

    cmp = sub.add_parser("compare", help="one table across runs with paired significance", parents=[common])
    cmp.add_argument("runs", nargs="+", help="run folders; the first is the reference")
    cmp.add_argument("--out", default=None, help="also write the comparison here")
    cmp.add_argument("--format", choices=("md", "csv", "json"), default="md", help="of the printed / written output")
    cmp.add_argument("--plot", default=None, metavar="PNG",
                     help="also draw every run's accuracy against extra views (SVS and MVN panels) here")
    cmp.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT)
    cmp.add_argument("--seed", type=int, default=0)

    rep = sub.add_parser("report", help="re-render report.md and the plots of a run from its summary.json",
                         parents=[common])
    rep.add_argument("run", help="run folder")

    sub.add_parser("models", help="list the registered model adapters", parents=[common])
    from eval.browse.cli import add_browse_parser
    from eval.import_cli import add_import_parser
    from eval.ood import add_ood_parser
    add_browse_parser(sub, parents=[common])
    add_import_parser(sub, parents=[common])
    add_ood_parser(sub, parents=[common])
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from bench.protocol import protocol_from_arguments
    from eval.inputs import parse_model_args
    from eval.plan import launcher_shard
    from eval.runner import evaluate

    model_args, problems = parse_model_args(args.model_arg)
    shard = args.shard
    if shard is None and launcher_shard() is not None:  # torchrun / accelerate launch: one shard per process
        shard = "{}/{}".format(*launcher_shard())
    fallback_args, more = parse_model_args(args.fallback_arg, flag="--fallback-arg")
    protocol = protocol_from_arguments(args)
    summary = evaluate(args.bench, args.model, args.out, settings=args.settings, seed=args.seed,
                       circular=args.circular, limit=args.limit, batch_size=args.batch_size,
                       model_args=model_args, protocol=protocol, fallback=args.fallback,
                       fallback_args=fallback_args if args.fallback else None, n_boot=args.n_boot,
                       blind_run=args.blind_run, human_json=args.human_json, progress=not args.no_progress,
                       plots=not args.no_plots, extra_problems=problems + more, wait=args.wait, shard=shard)
    if summary is None:  # a shard whose siblings are still answering
        return 0
    from eval.report import render_ssmn_table
    print(render_ssmn_table([(summary["run"]["model"], summary)]))
    print(f"wrote {Path(args.out) / 'report.md'}")
    return 0


def cmd_finish(args: argparse.Namespace) -> int:
    from eval.report import render_ssmn_table
    from eval.runner import finish
    summary = finish(args.run, n_boot=args.n_boot, plots=False if args.no_plots else None, wait=args.wait)
    print(render_ssmn_table([(summary["run"]["model"], summary)]))
    print(f"wrote {Path(args.run) / 'report.md'}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from eval.compare import compare_runs
    text = compare_runs(args.runs, n_boot=args.n_boot, seed=args.seed, output=args.format, plot=args.plot)
    print(text)
    if args.out:
        atomic_write_text(args.out, text)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from eval.compare import load_run
    from eval.plots import save_plots
    from eval.report import render_report
    _, summary, _ = load_run(args.run)
    atomic_write_text(Path(args.run) / "report.md", render_report(summary))
    save_plots(summary, Path(args.run))
    print(f"wrote {Path(args.run) / 'report.md'}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from eval.adapters import available_models, get_model_class
    for name in available_models():
        doc = (get_model_class(name).__doc__ or "").strip().splitlines()
        print(f"{name:12s} {doc[0] if doc else ''}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = getattr(args, "func", None) or {"run": cmd_run, "finish": cmd_finish, "compare": cmd_compare,
                                              "report": cmd_report, "models": cmd_models}[args.command]
    try:
        return handler(args)
    except EvalInputError as err:
        for line in err.problems:
            print(line, file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted: finished batches are saved; rerun the same command to continue", file=sys.stderr)
        return 130
    except Exception as err:  # every other failure: one line, the traceback only on request
        if getattr(args, "debug", False):
            raise
        print(" ".join(describe_failure(err).split()), file=sys.stderr)
        return err.exit_code if isinstance(err, RunError) else DATA


if __name__ == "__main__":
    sys.exit(main())
