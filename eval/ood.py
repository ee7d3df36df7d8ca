"""``python -m eval ood``: a model inside and outside the synthetic benchmark's training distribution.

Generates (or reuses) the test-only splits of ``configs/bench/ood_*.yaml`` (crowds, camera rigs,
wide lenses), scores the model on the in-distribution test split and on each of them with the
standard protocol (``python -m eval run``: every view setting; one run folder per split, so an
interrupted command continues where it stopped), and prints one table: in-distribution beside
each split, for SVS / MVN at +0 and -1, MVN +0 at in-distribution's task mix (the splits' task
shares differ), the necessity gap, overall, each axis x granularity and each task, with 95 % cluster-bootstrap intervals, and each split's difference from
in-distribution with its own interval. The splits share no scene (their seeds differ), so the
difference's interval resamples the two splits' scenes independently.

    python -m eval ood --ckpt checkpoints/<run>/best.ckpt              # crowd, cameras, fov
    python -m eval ood --model random --splits crowd --out runs/ood-random
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from common.atomic import atomic_write_text
from bench.constants import DEFAULT_N_BOOT, OVERALL
from eval.bootstrap import cluster_sums, cluster_weights, percentile_ci, replicate_means
from eval.errors import DATA, USAGE, EvalInputError

OOD_CONFIGS = {"crowd": "configs/bench/ood_crowd.yaml", "cameras": "configs/bench/ood_cameras.yaml",
               "fov": "configs/bench/ood_fov.yaml"}
IN_DIST = "in-dist"
HEADLINE = [("SVS +0", ("acc", "+0", "SVS")), ("MVN +0", ("acc", "+0", "MVN")), ("MVN -1", ("acc", "-1", "MVN")),
            ("necessity gap", "gap"), ("overall", ("ag", OVERALL, "all")), ("spatial", ("ag", "spatial", "all")),
            ("temporal", ("ag", "temporal", "all"))]
MIX = "mvn_mix"  # MVN +0 with each MVN task weighted by its questions in-distribution
GRANULARITY_ROWS = [(f"{axis} {gran}", ("ag", axis, gran)) for axis in ("spatial", "temporal")
                    for gran in ("coarse", "fine")]


def parse_splits(text: str) -> tuple[dict[str, str], list[str]]:
    """``"crowd,fov"`` or ``"crowd,mine=path.yaml"`` -> {name: config path}; problems."""
    out, problems = {}, []
    for item in [x.strip() for x in text.split(",") if x.strip()]:
        name, sep, path = item.partition("=")
        if not sep and name not in OOD_CONFIGS:
            problems.append(f"ERROR --splits {name!r}: unknown split; known: {', '.join(OOD_CONFIGS)} "
                            f"(or name=config.yaml)")
            continue
        if name == IN_DIST or name in out:
            problems.append(f"ERROR --splits {name!r}: {'reserved' if name == IN_DIST else 'given twice'}")
            continue
        out[name] = path if sep else OOD_CONFIGS[name]
    if not out and not problems:
        problems.append("ERROR --splits: no split given")
    return out, problems


def _differences(a, b, path: str = "") -> list[str]:
    """Dotted keys where two plain config dicts differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [k for key in sorted(set(a) | set(b))
                for k in _differences(a.get(key), b.get(key), f"{path}.{key}" if path else key)]
    return [] if a == b else [path]


def split_config(config: str | Path, overrides: list[str]):
    """The generator config of a split (a ``SynthConfig``).

    Raises:
        EvalInputError: a bad config, or one whose test split gets no scene (exit 2, one line).
    """
    from common.config import ConfigError, load_config
    from bench.synth.config import SynthConfig
    try:
        cfg = load_config(SynthConfig, config, overrides)
    except ConfigError as err:
        raise EvalInputError([f"ERROR {' '.join(str(err).split())}"], USAGE) from None
    if cfg.split_fractions[2] <= 0:
        raise EvalInputError([f"ERROR {config}: split_fractions gives the test split no scene"], USAGE)
    return cfg


def ensure_split(config: str | Path, root: str | Path, overrides: list[str], progress: bool = True) -> Path:
    """The test split of ``config``'s benchmark under ``root``: reused when ``root`` holds one
    generated from the same config (``workers`` aside), generated there when ``root`` is missing.

    Raises:
        EvalInputError: a bad config (exit 2), a folder generated from another config or a
            generator failure (exit 1), one line each.
    """
    from bench.synth.generate import SceneError, generate, recorded_config
    root = Path(root)
    cfg = split_config(config, overrides)
    test = root / "test" / "benchmark.json"
    if root.exists():
        if not test.is_file():
            raise EvalInputError([f"ERROR {root}: exists but holds no test/benchmark.json; remove it to generate "
                                  f"{config} there"], DATA)
        with open(test) as fh:
            stored = json.load(fh).get("config", {})
        want = recorded_config(cfg, "test")  # as the test split records it (keys that did not shape it left out)
        differ = [k for k in _differences(stored, want) if k != "workers"]
        if differ:
            raise EvalInputError([f"ERROR {root}: generated from another config than {config} (differs in "
                                  f"{', '.join(differ[:6])}{' ...' if len(differ) > 6 else ''}); remove it or "
                                  f"pass another --data"], DATA)
        return root / "test"
    print(f"[ood] generating {config} into {root} ...", file=sys.stderr, flush=True)
    try:
        generate(cfg, root, progress=progress)
    except SceneError as err:
        raise EvalInputError([f"ERROR {config}: {err}"], DATA) from None
    return root / "test"


def _config_seed(split_dir: Path) -> int | None:
    with open(split_dir / "benchmark.json") as fh:
        return (json.load(fh).get("config") or {}).get("seed")


def _split_table(units: list, n_boot: int, seed: int) -> dict:
    """Per cell of one split: point (points), bootstrap replicates (B,) and n; plus the
    necessity gap's, all from one cluster draw."""
    from eval.metrics import unit_cells
    clusters = sorted({u.cluster for u in units})
    index = {c: i for i, c in enumerate(clusters)}
    weights = cluster_weights(len(clusters), n_boot, seed)
    members: dict[tuple, list] = {}
    for u in units:
        for cell in unit_cells(u):
            members.setdefault(cell, []).append(u)
    out = {}
    for cell, us in members.items():
        sums, counts = cluster_sums([100.0 * u.score for u in us], [u.cluster for u in us], index)
        out[cell] = {"point": float(sums.sum() / counts.sum()), "reps": replicate_means(weights, sums, counts),
                     "n": len({u.sample_id for u in us})}
    plus, minus = out.get(("acc", "+0", "MVN")), out.get(("acc", "-1", "MVN"))
    if plus and minus:
        out["gap"] = {"point": plus["point"] - minus["point"], "reps": plus["reps"] - minus["reps"], "n": plus["n"]}
    return out


def ood_table(units_by_split: dict[str, list], n_boot: int = DEFAULT_N_BOOT, seed: int = 0) -> dict:
    """{"splits": [...], "rows": [{"metric", "cells": {split: {"acc", "ci", "n", "diff", "diff_ci"}}}]}.

    ``units_by_split`` maps IN_DIST and each OOD split to its scored units (eval.metrics.Unit);
    each split's scenes are resampled on their own (seed + its position)."""
    tables = {name: _split_table(units, n_boot, seed + i) for i, (name, units) in enumerate(units_by_split.items())}
    kind = {u.task: (u.axis or "", u.subset) for units in units_by_split.values() for u in units}
    tasks = sorted(kind, key=lambda t: (*kind[t], t))  # spatial MVN, spatial SVS, temporal; by name
    ref = tables.get(IN_DIST, {})
    mvn_tasks = [t for t in tasks if kind[t][1] == "MVN" and ("task", t) in ref]
    for table in tables.values():  # MVN +0 at in-distribution's task mix: a split's own mix moves its MVN figure
        common = [t for t in mvn_tasks if ("task", t) in table]
        weights = np.array([ref[("task", t)]["n"] for t in common], float)
        if common and weights.sum() > 0:
            table[MIX] = {"point": float(weights @ [table[("task", t)]["point"] for t in common] / weights.sum()),
                          "reps": weights @ np.stack([table[("task", t)]["reps"] for t in common]) / weights.sum(),
                          "n": sum(table[("task", t)]["n"] for t in common)}
    rows = []
    for metric, cell in HEADLINE[:2] + [("MVN +0, in-dist task mix", MIX)] + HEADLINE[2:] + GRANULARITY_ROWS + \
            [(f"task {t}", ("task", t)) for t in tasks]:
        cells = {}
        for name, table in tables.items():
            if cell not in table:
                continue
            got = table[cell]
            entry = {"acc": round(got["point"], 2), "ci": percentile_ci(got["reps"]), "n": got["n"]}
            if name != IN_DIST and cell in ref:
                diff_reps = got["reps"] - ref[cell]["reps"]
                entry["diff"] = round(got["point"] - ref[cell]["point"], 2)
                entry["diff_ci"] = percentile_ci(diff_reps)
            cells[name] = entry
        if cells:
            rows.append({"metric": metric, "cells": cells})
    return {"splits": list(units_by_split), "n_boot": n_boot, "seed": seed, "units": "points (0-100)", "rows": rows}


def _ci(ci) -> str:
    return f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "–"


def render_markdown(table: dict) -> str:
    """The table: a column per split (accuracy and interval) and, after each OOD split, its
    difference from in-distribution (``*``: the interval excludes 0)."""
    splits = table["splits"]
    head = ["metric"]
    for name in splits:
        head += [name] if name == IN_DIST else [name, "Δ"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    n_row = ["questions"]
    for name in splits:
        n = next((r["cells"][name]["n"] for r in table["rows"] if r["metric"] == "overall" and name in r["cells"]), 0)
        n_row += [str(n)] if name == IN_DIST else [str(n), ""]
    lines.append("| " + " | ".join(n_row) + " |")
    for row in table["rows"]:
        out = [row["metric"]]
        for name in splits:
            c = row["cells"].get(name)
            out.append(f"{c['acc']:.1f} {_ci(c['ci'])}" if c else "–")
            if name != IN_DIST:
                if c and "diff" in c:
                    lo, hi = c["diff_ci"] or (0, 0)
                    star = "*" if c["diff_ci"] and (hi < 0 or lo > 0) else ""
                    out.append(f"{c['diff']:+.1f}{star} [{lo:+.1f}, {hi:+.1f}]")
                else:
                    out.append("–")
        lines.append("| " + " | ".join(out) + " |")
    note = (f"Accuracy in points at each sample's primary setting unless the row names one; \"MVN +0, in-dist task "
            f"mix\": each MVN task's accuracy weighted by its share of {IN_DIST}'s MVN questions (tasks a split lacks "
            f"left out), so a split's own task mix does not move it; 95 % cluster-bootstrap "
            f"intervals over scenes ({table['n_boot']} replicates, seed {table['seed']}). Δ: split − {IN_DIST}, its "
            f"interval from the two splits' scenes resampled independently (they share none); * the interval "
            f"excludes 0.")
    return "\n".join(lines) + "\n\n" + note + "\n"


def run_ood(args: argparse.Namespace) -> int:
    from bench.protocol import protocol_from_arguments
    from eval.compare import load_run
    from eval.inputs import parse_model_args
    from eval.metrics import score_units
    from eval.runner import evaluate

    problems = []
    splits, more = parse_splits(args.splits)
    problems += more
    model_args, more = parse_model_args(args.model_arg)
    problems += more
    if bool(args.ckpt) == bool(args.model):
        problems.append("ERROR ood: give --ckpt (a python train.py checkpoint) or --model (any adapter), not both")
    if args.ckpt:
        if not Path(args.ckpt).is_file():
            problems.append(f"ERROR --ckpt {args.ckpt}: not found")
        model, model_args = "crossview", {**model_args, "ckpt": args.ckpt}
    else:
        model = args.model
    if args.workers is not None and args.workers < 0:
        problems.append(f"ERROR --workers {args.workers}: must be >= 0")
    if problems:
        raise EvalInputError(problems, USAGE)
    out = Path(args.out) if args.out else Path("runs/ood") / (Path(args.ckpt).parent.name if args.ckpt else model)
    overrides = list(args.bench_override) + ([f"workers={args.workers}"] if args.workers is not None else [])
    progress = not args.no_progress

    id_root = Path(args.id_bench)
    id_split = id_root if (id_root / "benchmark.json").is_file() else id_root / "test"
    id_workers = [f"workers={args.workers}"] if args.workers is not None else []
    if (id_split / "benchmark.json").is_file():
        seeds = {IN_DIST: (_config_seed(id_split), str(id_split))}
    elif id_root.exists():
        raise EvalInputError([f"ERROR --id-bench {id_root}: holds no test/benchmark.json"], DATA)
    else:
        seeds = {IN_DIST: (split_config(args.id_config, id_workers).seed, args.id_config)}
    seeds.update({name: (split_config(config, overrides).seed, config) for name, config in splits.items()})
    names = list(seeds)
    clash = [f"ERROR {seeds[a][1]}: seed {seeds[a][0]} is also the seed of {seeds[b][1]}; an OOD split needs scenes "
             f"no other split has" for i, a in enumerate(names) for b in names[:i]
             if seeds[a][0] is not None and seeds[a][0] == seeds[b][0]]
    if clash:  # before anything is generated
        raise EvalInputError(clash, DATA)
    if not (id_split / "benchmark.json").is_file():
        id_split = ensure_split(args.id_config, id_root, id_workers, progress)
    dirs = {IN_DIST: id_split}
    for name, config in splits.items():
        dirs[name] = ensure_split(config, Path(args.data) / name, overrides, progress)

    units = {}
    protocol = protocol_from_arguments(args)
    for name, split_dir in dirs.items():
        print(f"[ood] {name}: scoring {split_dir} -> {out / name}", file=sys.stderr, flush=True)
        evaluate(split_dir, model, out / name, seed=args.seed, limit=args.limit, batch_size=args.batch_size,
                 model_args=model_args, protocol=protocol, n_boot=args.n_boot, progress=progress, plots=False)
        units[name] = score_units(load_run(out / name)[2])
    table = ood_table(units, n_boot=args.n_boot, seed=args.seed)
    table["model"], table["model_args"] = model, {k: str(v) for k, v in model_args.items()}
    table["benchmarks"] = {name: str(d) for name, d in dirs.items()}
    text = render_markdown(table)
    atomic_write_text(out / "ood.md", text)
    atomic_write_text(out / "ood.json", json.dumps(table, indent=1) + "\n")
    print(text)
    print(f"wrote {out / 'ood.md'} and {out / 'ood.json'}")
    return 0


def add_ood_parser(sub, parents) -> argparse.ArgumentParser:
    from bench.protocol import add_protocol_arguments
    p = sub.add_parser("ood", parents=parents,
                       help="score a model in and out of the training distribution (crowds, camera rigs, lenses)")
    p.add_argument("--ckpt", default=None, help="a python train.py checkpoint (the crossview adapter)")
    p.add_argument("--model", default=None, help="or any registered adapter (python -m eval models)")
    p.add_argument("--model-arg", action="append", default=[], metavar="K=V", help="adapter argument; repeatable")
    p.add_argument("--splits", default=",".join(OOD_CONFIGS),
                   help=f"comma list of {', '.join(OOD_CONFIGS)} (configs/bench/ood_<name>.yaml) or name=config.yaml "
                        f"(default: all three)")
    p.add_argument("--data", default="data/ood", help="the OOD splits live in DATA/<split>: reused, or generated "
                                                      "when missing (default data/ood)")
    p.add_argument("--bench-override", action="append", default=[], metavar="K=V",
                   help="generator override for every OOD split, e.g. n_scenes=20 (a smaller, quicker check)")
    p.add_argument("--id-bench", default="data/synth-default",
                   help="the in-distribution benchmark folder (its test split) or split folder; generated from "
                        "--id-config when missing (default data/synth-default, what python train.py trains on)")
    p.add_argument("--id-config", default="configs/bench/default.yaml")
    p.add_argument("--out", default=None, help="run folders OUT/<split> and the table OUT/ood.md, OUT/ood.json "
                                               "(default runs/ood/<the checkpoint's run folder>)")
    p.add_argument("--workers", type=int, default=None, help="generator processes (default: the configs'; 1: in "
                                                             "this process)")
    p.add_argument("--limit", type=int, default=None, help="only the first N samples of each split")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0, help="view orders, the -1 choice and the bootstrap")
    p.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT)
    add_protocol_arguments(p)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run_ood)
    return p
