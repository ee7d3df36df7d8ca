"""The entity ceiling: the entity reasoner fed ground-truth entities, trained and scored.

    python -m scripts.probe_entity_ceiling [--bench data/synth-default] [--out runs/entity_ceiling]
        [--seed 0] [--threads 2] [key=value ...]   (epochs=16 by default)

Every person and object an image shows is given as the generator recorded it
(``bench.entities``: its box and the attributes *as that view shows them*; no
identity), in place of what perception would predict. The model, losses and training are those
of ``training.entity_fit``; the epoch is chosen on val ``+0``. What the ceiling misses is what the
reasoning half misses. Beside the protocol's figures (the evaluator's ``eval.summary``) it prints
the three steps separately, on val and test at ``+0``: the pointer (precision and recall of the
entities the evidence names), the association (precision and recall of "same person" over pairs of
sightings in different images) and the answer accuracy given the right entities (the pointer
replaced by the evidence).

key=value overrides set ``EntityFitConfig`` fields (``epochs=5``, ``model.width=64``, ...).
Writes ``<out>/summary_<split>.json``, ``<out>/ceiling.json`` and ``<out>/ceiling.md``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from bench.constants import K_T
from eval.summary import summarize
from training.entity_fit import EntityFitConfig, fit_entity_reasoner


def apply_overrides(cfg: EntityFitConfig, overrides: list[str]) -> EntityFitConfig:
    """``key=value`` onto the config (dotted keys reach ``model``); an unknown key is an error."""
    for item in overrides:
        if "=" not in item:
            raise SystemExit(f"override {item!r}: expected key=value")
        key, value = item.split("=", 1)
        target, name = cfg, key
        if "." in key:
            head, name = key.split(".", 1)
            if head != "model":
                raise SystemExit(f"override {key!r}: unknown section {head!r} (only model.*)")
            target = cfg.model
        fields = {f.name: f for f in dataclasses.fields(target)}
        if name not in fields:
            raise SystemExit(f"override {key!r}: unknown key (known: {', '.join(sorted(fields))})")
        current = getattr(target, name)
        if isinstance(current, bool):
            parsed = value.lower() in ("1", "true", "yes", "on")
        elif current is None:  # an optional field: a number (limit=200) or a path (records=DIR)
            parsed = int(value) if value.lstrip("-").isdigit() else value
        else:
            parsed = type(current)(value)
        setattr(target, name, parsed)
    return cfg


def figures(summary: dict, records: list[dict]) -> dict:
    acc, ag = summary["acc"], summary["by_axis_granularity"]
    axis = {}
    for a in ("spatial", "temporal"):
        rows = [r["correct"] for r in records if r["setting"] == "+0" and r["axis"] == a]
        axis[a] = 100.0 * sum(rows) / len(rows) if rows else None
    return {"SVS+0": acc["+0"].get("SVS"), "MVN+0": acc["+0"].get("MVN"), "overall+0": acc["+0"].get("overall"),
            "MVN-1": acc.get("-1", {}).get("MVN"), "delta_dis": summary.get("delta_dis"),
            "necessity_gap": summary.get("necessity_gap"), "axis_granularity": ag, "axis_mean": axis,
            "by_task": summary["by_task"]}


def markdown(result: dict) -> str:
    lines = ["| split | SVS +0 | MVN +0 | MVN -1 | Δ dis | gap | spatial / temporal | overall +0 | pointer P / R "
             "| association P / R | answer, right entities |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    for split in ("val", "test"):
        f, d = result[split]["figures"], result[split]["diagnostics"]
        lines.append(f"| {split} | {fmt(f['SVS+0'])} | {fmt(f['MVN+0'])} | {fmt(f['MVN-1'])} | {fmt(f['delta_dis'])} "
                     f"| {fmt(f['necessity_gap'])} | {fmt(f['axis_mean']['spatial'])} / {fmt(f['axis_mean']['temporal'])} "
                     f"| {fmt(f['overall+0'])} | {fmt(d['pointer_precision'])} / "
                     f"{fmt(d['pointer_recall'])} | {fmt(d['association_precision'])} / "
                     f"{fmt(d['association_recall'])} | {fmt(d.get('answer_acc_oracle_pointer'))} |")
    lines += ["", "| task | val +0 | test +0 |", "|---|---|---|"]
    for task in result["test"]["figures"]["by_task"]:
        lines.append(f"| {task} | {fmt(result['val']['figures']['by_task'].get(task))} "
                     f"| {fmt(result['test']['figures']['by_task'][task])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", default="data/synth-default")
    parser.add_argument("--out", default="runs/entity_ceiling")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("overrides", nargs="*", help="EntityFitConfig key=value overrides")
    args = parser.parse_args(argv)
    cfg = apply_overrides(EntityFitConfig(bench_dir=args.bench, seed=args.seed, threads=args.threads), args.overrides)
    if not (Path(args.bench) / "labels").is_dir():
        print(f"error: {args.bench}/labels is missing: generate the benchmark with python -m bench generate "
              "(it writes the entity labels)", file=sys.stderr)
        return 2
    result = fit_entity_reasoner(cfg, args.out)
    out = Path(args.out)
    report = {"config": dataclasses.asdict(cfg), "fit_seconds": result["fit_seconds"],
              "best_val_acc": result["best_val_acc"], "history": result["history"]}
    for split in ("val", "test"):
        summary = summarize(result[split]["records"], dict(K_T), n_boot=1000, seed=args.seed,
                            header={"model": "entity-ceiling", "bench": f"{args.bench}/{split}"})
        (out / f"summary_{split}.json").write_text(json.dumps(summary, indent=1) + "\n")
        report[split] = {"figures": figures(summary, result[split]["records"]), "diagnostics": result[split]["diagnostics"]}
    (out / "ceiling.json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    (out / "ceiling.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
