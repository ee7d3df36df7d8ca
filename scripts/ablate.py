"""The ablation table: the entity model, each of its components switched off, bag of frames,
the trained blind model, the entity ceiling, and zero-shot models (random, the tower zero-shot,
the blind LLM, any adapter), under one protocol on one benchmark.

    python -m scripts.ablate --bench data/synth-default --out runs/ablation \
        [--models qwen2_vl:path=/models/qwen2-vl-2b ...] [--skip-blind] [key=value ...]

--bench holds train/, val/, test/ (generated from configs/bench/default.yaml when missing).
Each training config (configs/default.yaml, configs/ablations/*.yaml and the ceiling,
configs/ceiling.yaml, whose row says so) is trained once into OUT/runs/<name>/ (an existing
best.ckpt is reused; the tower's features and the predicted records are cached once for all), then
every model is scored on the test split. Writes OUT/ablation.md, OUT/ablation.json and
OUT/distraction_curves.png. Trailing key=value overrides apply to every trained config
(e.g. trainer.max_epochs=4).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")

ROOT = Path(__file__).resolve().parents[1]
BASELINES = {"random": {"seed": 0}}


def training_configs() -> list[tuple[str, Path]]:
    """(row name, config) of the full model and every ablation config."""
    ablations = sorted((ROOT / "configs" / "ablations").glob("*.yaml"))
    return ([("full", ROOT / "configs" / "default.yaml")] + [(p.stem, p) for p in ablations]
            + [("ceiling", ROOT / "configs" / "ceiling.yaml")])


def train_or_reuse(name: str, config: Path, bench: Path, out: Path, overrides: list[str]) -> tuple[Path, float]:
    """Train ``config`` into out/runs/name unless a finished run is there; (eval dir, seconds)."""
    from training.config import load_train_config
    from training.run import train
    run = out / "runs" / name
    if (run / "best.ckpt").is_file() and (run / "eval" / "summary.json").is_file():
        print(f"[ablate] {name}: reusing {run}", flush=True)
        return run / "eval", None
    cfg = load_train_config(config, [f"data.bench_dir={bench}", f"run_name={name}", f"out_dir={out / 'runs'}",
                                     *overrides])
    started = time.time()
    print(f"[ablate] training {name} ({config.relative_to(ROOT)})", flush=True)
    train(cfg, config_name=name)
    return run / "eval", time.time() - started


def _cost(eval_dir: Path, seconds: float | None) -> str:
    """Seconds spent here, or, for a reused run, the fit time it recorded."""
    if seconds is not None:
        return f"{seconds:.0f}"
    metrics = Path(eval_dir).parent / "metrics.json"
    fit = json.loads(metrics.read_text()).get("fit_seconds") if metrics.is_file() else None
    return f"reused (fit {fit:.0f})" if fit is not None else "reused"


def score_adapter(name: str, model: str, args: dict, bench: Path, out: Path, settings: list[str]) -> tuple[Path, float]:
    from eval.runner import evaluate
    target = out / "zero_shot" / name
    started = time.time()
    print(f"[ablate] scoring {name}", flush=True)
    evaluate(bench / "test", model, target, settings=settings, model_args=args, progress=True)
    return target, time.time() - started


def parse_model_spec(spec: str) -> tuple[str, str, dict]:
    """``name`` or ``name:key=value,key=value`` -> (row name, adapter, args)."""
    from common.config import KeyValueError, parse_key_value
    model, _, rest = spec.partition(":")
    args = {}
    for item in filter(None, rest.split(",")):
        try:
            key, value = parse_key_value(item, parse_value=False)
        except KeyValueError as err:
            raise SystemExit(f"--models {spec!r}: {item!r} {err}") from None
        args[key] = value
    return model, model, args


def plot_curves(rows: list[tuple[str, dict]], path: Path) -> None:
    """Accuracy against the number of extra views, one line per model, SVS and MVN panels."""
    from eval.plots import plot_distraction_curves
    plot_distraction_curves(rows, path)


def write_outputs(out: Path, runs: list[tuple[str, Path, float]]) -> dict:
    from eval.compare import compare_runs
    from eval.report import _table, render_cvbench_table, render_failure_table, render_ssmn_table
    from eval.summary import read_summary
    rows = [(name, read_summary(d)) for name, d, _ in runs]
    blind = next((s for name, s in rows if name.startswith("blind")), None)
    parts = ["# Ablations and zero-shot baselines", "",
             f"Benchmark test split; {rows[0][1].get('n_samples')} samples. Accuracy in points; "
             "Δ dis = mean over subsets of mean_k (Acc(+0) − Acc(+k)); Gap = Acc_MVN(+0) − Acc_MVN(−1).", "",
             "## SSMNBench layout", "", render_ssmn_table(rows), "",
             "## CVBench layout", "", render_cvbench_table(rows, blind=blind), "",
             "## Cost", "", _table(["Model", "seconds (train + eval, or eval)"],
                                   [[n, _cost(d, sec)] for n, d, sec in runs]), ""]
    for name, s in rows:
        parts += [f"## Failure taxonomy: {name}", "", render_failure_table(s), ""]
    parts += ["## Paired comparison against the full model", "",
              compare_runs([d for _, d, _ in runs], labels=[n for n, _, _ in runs]).split("## Paired differences against the reference", 1)[-1].strip(), ""]
    (out / "ablation.md").write_text("\n".join(parts) + "\n")
    keys = ("acc", "acc_ci", "delta_dis", "delta_dis_ci", "delta_dis_by_subset", "necessity_gap", "necessity_gap_ci",
            "by_axis_granularity", "by_task", "failure_taxonomy", "chance", "n_samples")
    table = {name: {k: s.get(k) for k in keys} | {"seconds": None if sec is None else round(sec, 1)} for (name, s), (_, _, sec) in zip(rows, runs)}
    (out / "ablation.json").write_text(json.dumps(table, indent=2) + "\n")
    plot_curves(rows, out / "distraction_curves.png")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="data/synth-default", help="folder with train/ val/ test/")
    parser.add_argument("--out", default="runs/ablation")
    parser.add_argument("--models", nargs="*", default=[], help="zero-shot adapters: name or name:k=v,k=v")
    parser.add_argument("--configs", nargs="*", default=None, help="only these training rows (full, no_camera, ...)")
    parser.add_argument("--full-run", default=None,
                        help="reuse a finished `python train.py` run folder of configs/default.yaml as the full row")
    parser.add_argument("--skip-blind", action="store_true", help="skip the SmolLM2 blind baseline")
    parser.add_argument("--settings", default="+0,+1,+2,+3,-1,all")
    parser.add_argument("--report-only", action="store_true", help="only rewrite the outputs from finished runs")
    parser.add_argument("overrides", nargs="*", help="key=value for every trained config")
    args = parser.parse_args(argv)
    bench, out = Path(args.bench), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = [s for s in args.settings.split(",") if s]
    started = time.time()
    runs: list[tuple[str, Path, float]] = []
    if args.report_only:
        previous = json.loads((out / "ablation.json").read_text()) if (out / "ablation.json").is_file() else {}
        for name, _ in training_configs():
            folder = Path(args.full_run) / "eval" if name == "full" and args.full_run else out / "runs" / name / "eval"
            if (folder / "summary.json").is_file():
                runs.append((name, folder, previous.get(name, {}).get("seconds")))
        for folder in sorted((out / "zero_shot").glob("*")) if (out / "zero_shot").is_dir() else []:
            runs.append((folder.name, folder, previous.get(folder.name, {}).get("seconds")))
        write_outputs(out, runs)
        print(f"[ablate] rewrote {out / 'ablation.md'} from {len(runs)} finished runs")
        return 0
    for name, config in training_configs():
        if args.configs is not None and name not in args.configs:
            continue
        if name == "full" and args.full_run:
            runs.append((name, Path(args.full_run) / "eval", None))
            continue
        eval_dir, seconds = train_or_reuse(name, config, bench, out, args.overrides)
        runs.append((name, eval_dir, seconds))
    zero_shot = [("random", "random", BASELINES["random"]), ("tower zero-shot", "clip-zeroshot", {})]
    if not args.skip_blind:
        zero_shot.append(("blind-llm", "blind-llm", {}))
    zero_shot += [parse_model_spec(spec) for spec in args.models]
    for name, model, model_args in zero_shot:
        runs.append((name, *score_adapter(name, model, model_args, bench, out, settings)))
    write_outputs(out, runs)
    print((out / "ablation.md").read_text().split("## CVBench layout")[0])
    print(f"[ablate] wrote {out / 'ablation.md'}, ablation.json, distraction_curves.png in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
