"""``python -m bench export {hf,lmms-eval,vlmevalkit}`` and ``python -m bench import hf``
(wired in by bench/__main__.py). Errors print one ``ERROR ...`` line each and exit 1 (bad
data) or 2 (bad arguments); nothing is left half-written."""
from __future__ import annotations

import argparse
import json
import sys


def _protocol_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--settings", default=None,
                   help="comma list of +0,+1,+2,+3,-1,all (default: all that apply); write --settings=-1,+0 "
                        "when the list starts with -1")
    p.add_argument("--seed", type=int, default=0, help="view-order seed, as `python -m eval run --seed`")
    p.add_argument("--max-extra-svs", type=int, default=3)
    p.add_argument("--max-extra-mvn", type=int, default=2)
    p.add_argument("--minus-one", choices=("each", "seeded"), default="each")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


def _config(args: argparse.Namespace):
    from bench.export_hf import ExportConfig
    from eval.settings import ProtocolConfig, check_settings, parse_settings
    settings = parse_settings(args.settings) if args.settings else None
    cfg = ExportConfig(name=getattr(args, "name", None) or "", license=getattr(args, "license", "apache-2.0"),
                       settings=settings, seed=args.seed,
                       max_extra={"SVS": args.max_extra_svs, "MVN": args.max_extra_mvn}, minus_one=args.minus_one,
                       shard_mb=getattr(args, "shard_mb", None) or ExportConfig().shard_mb)
    problems = check_settings(parse_settings(args.settings), ProtocolConfig(cfg.max_extra, cfg.minus_one))
    return cfg, [f"ERROR --settings: {p}" for p in problems]


def _fail(lines: list[str], code: int = 1) -> int:
    for line in lines[:100]:
        print(line, file=sys.stderr)
    if len(lines) > 100:
        print(f"... and {len(lines) - 100} more", file=sys.stderr)
    return code


def _run_export(args: argparse.Namespace) -> int:
    from bench.format import BenchmarkError
    from bench.outdir import OutDirError
    cfg, problems = _config(args)
    if problems:
        return _fail(problems, 2)
    try:
        if args.target == "hf":
            from bench.export_hf import export_hf
            result = export_hf(args.dir, args.out, cfg, overwrite=args.overwrite)
            result["splits"] = {s: {c: n for c, (n, _) in v.items()} for s, v in result["splits"].items()}
        elif args.target == "lmms-eval":
            from bench.export_harness import export_lmms_eval
            result = export_lmms_eval(args.dir, args.out, cfg, name=args.name, dataset_path=args.dataset_path,
                                      overwrite=args.overwrite)
        else:
            from bench.export_harness import export_vlmevalkit
            result = export_vlmevalkit(args.dir, args.out, cfg, overwrite=args.overwrite)
    except BenchmarkError as err:
        return _fail([p.line() for p in err.problems])
    except (OutDirError, FileExistsError, FileNotFoundError, ValueError) as err:
        return _fail([f"ERROR {err}"])
    print(json.dumps(result, indent=1))
    return 0


def _run_import(args: argparse.Namespace) -> int:
    from bench.import_hf import ImportHFError, import_hf
    from bench.import_presets import parse_map
    overrides, problems = parse_map(args.map)
    if problems:
        return _fail(problems, 2)
    try:
        result = import_hf(args.files, args.out, preset=args.preset, overrides=overrides, name=args.name,
                           skip_invalid=args.skip_invalid, overwrite=args.overwrite, image_root=args.image_root)
    except ImportHFError as err:
        return _fail(err.problems)
    for line in result["skipped"]:
        print(f"skipped: {line}", file=sys.stderr)
    print(json.dumps({"samples": result["samples"], "skipped": len(result["skipped"]), "out": result["out"]}, indent=1))
    return 0


def add_transfer_parsers(subparsers) -> None:
    """Add ``export`` and ``import`` to ``python -m bench``."""
    from bench.import_presets import FIELDS, PRESETS
    exp = subparsers.add_parser("export", help="write a benchmark as a HF dataset, lmms-eval tasks or a VLMEvalKit TSV")
    targets = exp.add_subparsers(dest="target", required=True)
    p = targets.add_parser("hf", help="parquet with image columns: `samples` (lossless) and `queries` configs + card")
    p.add_argument("dir", help="benchmark folder, or a folder of split folders (train/ val/ test/)")
    p.add_argument("--out", required=True, help="dataset folder: README.md, samples/, queries/")
    p.add_argument("--name", default=None, help="pretty name on the dataset card")
    p.add_argument("--license", default="apache-2.0", help="license field of the card (default apache-2.0)")
    p.add_argument("--shard-mb", type=int, default=None, help="parquet shard size (default 500 MB)")
    _protocol_args(p)
    p.set_defaults(func=_run_export)
    p = targets.add_parser("lmms-eval", help="one lmms-eval task YAML per setting, a group, utils.py and the parquet")
    p.add_argument("dir", help="benchmark folder (one split)")
    p.add_argument("--out", required=True, help="task folder, e.g. tasks/crossview; its name names the tasks")
    p.add_argument("--name", default=None, help="group name (default: the --out folder name)")
    p.add_argument("--dataset-path", default=None,
                   help="Hub repo of an `export hf` of this benchmark; the tasks read its `queries` config")
    _protocol_args(p)
    p.set_defaults(func=_run_export)
    p = targets.add_parser("vlmevalkit", help="the TSV of VLMEvalKit's custom multiple-choice datasets")
    p.add_argument("dir", help="benchmark folder (one split)")
    p.add_argument("--out", required=True, help="FILE.tsv")
    _protocol_args(p)
    p.set_defaults(func=_run_export)

    imp = subparsers.add_parser("import", help="read a public multi-image benchmark into this format")
    sources = imp.add_subparsers(dest="source", required=True)
    p = sources.add_parser("hf", help="parquet / JSON / JSONL files (or folders of them) into a benchmark folder")
    p.add_argument("files", nargs="+", help="files or folders")
    p.add_argument("--preset", default="generic", choices=sorted(PRESETS), help="column layout (default generic)")
    p.add_argument("--map", action="append", default=[], metavar="FIELD=COLUMN",
                   help=f"read FIELD from COLUMN (comma list for options/images); fields: {', '.join(FIELDS)}")
    p.add_argument("--out", required=True, help="benchmark folder to write")
    p.add_argument("--name", default=None, help="benchmark name (default: the --out folder name)")
    p.add_argument("--image-root", default=None,
                   help="folder relative image paths are read under (default: each file's folder)")
    p.add_argument("--skip-invalid", action="store_true", help="drop rows that cannot be converted (listed)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing non-empty --out")
    p.set_defaults(func=_run_import)
