"""``python -m bench generate`` and ``python -m bench check`` (wired in by bench/__main__.py)."""
from __future__ import annotations

import argparse
import json
import sys


def _generate(args: argparse.Namespace) -> int:
    from common.config import ConfigError, load_config
    from bench.synth.config import SynthConfig
    from bench.synth.generate import SceneError, generate
    try:
        cfg = load_config(SynthConfig, args.config, args.overrides)
    except (ConfigError, ValueError) as err:
        print(f"config error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    try:
        summary = generate(cfg, args.out, overwrite=args.overwrite, progress=not args.quiet, debug=args.debug,
                           resume=args.resume)
    except (FileExistsError, SceneError) as err:
        print(str(err), file=sys.stderr)
        return 1
    for split, info in summary["splits"].items():
        if info["scenes"] and not info["questions"]:
            print(f"warning: split {split}: {info['scenes']} scene(s) but no verified question; it is not written",
                  file=sys.stderr)
    brief = {k: summary[k] for k in ("n_questions", "unique_images", "by_task", "seconds", "workers")}
    brief["splits"] = {k: {"questions": v["questions"], "unique_images": v["unique_images"]}
                       for k, v in summary["splits"].items()}
    print(json.dumps(brief, indent=1))
    return 0


def _check(args: argparse.Namespace) -> int:
    from bench.synth.check import check
    report = check(args.dir, out=args.out, sheet=args.sheet)
    print(json.dumps({k: v for k, v in report.items() if k not in ("by_task", "by_axis_granularity")}, indent=1))
    return 0 if report["svi_rate"] == 1.0 and report["cvr_rate"] == 1.0 and report.get("valid", True) else 1


def add_generate_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("generate", help="generate the synthetic benchmark (train/val/test splits)")
    p.add_argument("--config", default=None, help="YAML config (bench.synth.config.SynthConfig); defaults if omitted")
    p.add_argument("--out", required=True, help="output folder; gets train/, val/, test/ and summary.json")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--resume", action="store_true",
                   help="keep each finished scene in .<out>.partial beside --out, and reuse the ones a stopped "
                        "run of the same config left there (the same bytes as one run)")
    p.add_argument("--debug", action="store_true",
                   help="a failing scene raises its own exception with the traceback (with workers=1: in this process)")
    p.add_argument("overrides", nargs="*", help="key=value config overrides, e.g. seed=7 render.width=64")
    p.set_defaults(func=_generate)
    return p


def add_check_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("check", help="re-verify a generated benchmark and report its statistics")
    p.add_argument("dir", help="folder holding train/, val/, test/")
    p.add_argument("--out", default=None, help="write the report JSON here")
    p.add_argument("--sheet", default=None, help="contact-sheet PNG (default: next to --out, or DIR/contact_sheet.png)")
    p.set_defaults(func=_check)
    return p
