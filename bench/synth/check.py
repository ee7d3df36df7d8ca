"""``python -m bench check DIR``: re-verify a generated benchmark and report its statistics.

Everything is recomputed from the stored benchmark, loaded and validated as ``Sample`` objects
(bench.format): SVI/CVR from the per-view observations in ``meta`` with the same task verifiers
the generator used, letter and value balance, a text-only bag-of-words baseline (trained on
train, scored on test), an option-prior probe (the same kind of model on option-only structural
features: length, object kind, what an option shares with the others; ``option_prior_acc``,
should sit at chance) and a single-view oracle. A split that fails validation is reported
(``valid``: false, ``problems``) and left out of the figures.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from bench.constants import LETTERS, NOTA
from bench.format import BENCHMARK_FILES, BenchmarkError, Sample, load_benchmark
from bench.synth.blind import BlindClassifier, OptionPriorProbe
from bench.synth.contact_sheet import contact_sheet
from bench.synth.generate import SPLITS
from bench.synth.tasks import TASKS
from bench.synth.verify import check_question, oracle_answer


def _reverify(s: Sample) -> dict:
    task = TASKS[s.task]
    meta = s.meta
    nota = s.options[-1] == NOTA
    listed = [o for o in s.options if o != NOTA]
    answer = s.options[s.answer_index]
    views = [v.view_id for v in s.views]
    res = check_question(s.subset, task.consistent, meta["observations"], meta["facts"], views, listed, nota,
                         answer, s.gt_views)
    key = meta["verification"]["oracle_key"]
    oracle = oracle_answer(task.consistent, meta["observations"], meta["facts"], s.gt_views + s.extra_views,
                           listed, nota, key)
    res["oracle_correct"] = oracle == answer
    return res


def _axis(s: Sample) -> str:
    """The sample's CVBench axis; a sample without one counts as spatial."""
    return s.axis or "spatial"


def _rates(pairs: list[tuple[Sample, dict]], blind, test: list[Sample], n_opts: int, prior=None) -> dict:
    """SVI / CVR / golden-view rates, chance, blind and single-view oracle over some samples."""
    mvn = [c for s, c in pairs if s.subset == "MVN"]
    svs = [c for s, c in pairs if s.subset == "SVS"]
    mean = lambda xs: round(float(np.mean(xs)), 4) if xs else None  # noqa: E731
    return {"n": len(pairs), "n_test": len(test),
            "svi_rate": mean([c["svi"] for c in mvn]), "cvr_rate": mean([c["cvr"] and c["minimal"] for c in mvn]),
            "svs_golden_rate": mean([c["svi"] and c["cvr"] for c in svs]),
            "chance": mean([1.0 / len(s.options) for s, _ in pairs]),
            "blind_acc": round(blind.accuracy(test), 4) if test else None,
            "option_prior_acc": round(prior.accuracy(test), 4) if test and prior is not None else None,
            "single_view_oracle_acc_mvn": mean([c["oracle_correct"] for c in mvn]),
            "letter_hist": _hist([s.answer for s, _ in pairs], n_opts)}


def _hist(letters: list[str], n: int) -> dict[str, float]:
    c = Counter(letters)
    return {l: round(c[l] / max(len(letters), 1), 4) for l in LETTERS[:n]}


def check(root: str | Path, out: str | Path | None = None, sheet: str | Path | None = None) -> dict:
    """Report for the splits under ``root``; writes ``out`` (JSON) and a contact sheet PNG."""
    root = Path(root)
    data: dict[str, list[Sample]] = {}
    report: dict = {"dir": str(root), "valid": True, "problems": []}
    for split in SPLITS:
        if any((root / split / name).exists() for name in BENCHMARK_FILES):
            try:
                data[split] = load_benchmark(root / split).samples
            except BenchmarkError as err:
                report["valid"] = False
                report["problems"] += [p.line() for p in err.problems[:20]]
    samples = [s for split in data for s in data[split]]
    checks = [_reverify(s) for s in samples]
    mvn = [(s, c) for s, c in zip(samples, checks) if s.subset == "MVN"]
    svs = [(s, c) for s, c in zip(samples, checks) if s.subset == "SVS"]
    n_opts = max((len(s.options) for s in samples), default=4)
    chance = float(np.mean([1.0 / len(s.options) for s in samples])) if samples else float("nan")
    blind = BlindClassifier().fit(data.get("train", []))
    prior = OptionPriorProbe().fit(data.get("train", []))
    test = data.get("test", [])
    view_stats = {}
    for s in samples:
        for v, st in s.meta.get("view_stats", {}).items():
            view_stats[(s.scene, v)] = st
    seen = [st[0] for st in view_stats.values()]
    vis, occ = sum(st[1] for st in view_stats.values()), sum(st[2] for st in view_stats.values())
    images = {(split, f.image) for split in data for s in data[split] for v in s.views for f in v.frames}
    report.update({
        "n_questions": len(samples),
        "n_by_split": {k: len(v) for k, v in data.items()},
        "n_task_types": len({s.task for s in samples}),
        "unique_images": len(images),
        "svi_rate": float(np.mean([c["svi"] for _, c in mvn])) if mvn else float("nan"),
        "cvr_rate": float(np.mean([c["cvr"] and c["minimal"] for _, c in mvn])) if mvn else float("nan"),
        "svs_golden_rate": float(np.mean([c["svi"] and c["cvr"] for _, c in svs])) if svs else float("nan"),
        "letter_hist": _hist([s.answer for s in samples], n_opts),
        "letter_hist_by_split": {k: _hist([s.answer for s in v], n_opts) for k, v in data.items()},
        "chance": round(chance, 4),
        "blind_acc": round(blind.accuracy(test), 4),
        "blind_n_test": len(test),
        "option_prior_acc": round(prior.accuracy(test), 4),
        "single_view_oracle_acc_mvn": round(float(np.mean([c["oracle_correct"] for _, c in mvn])), 4) if mvn else None,
        "persons_per_image": round(float(np.mean(seen)), 3) if seen else None,
        "occlusion_rate": round(occ / vis, 4) if vis else None,
        "occlusion_rate_definition": "share of visible people per image with < 90% of their unoccluded pixels visible",
        "gt_views_hist": dict(sorted(Counter(len(s.gt_views) for s in samples).items())),
    })
    # CVBench's breakdown: per axis, and per axis x granularity
    report["by_axis"], report["by_axis_granularity"] = {}, {}
    for axis in sorted({_axis(s) for s in samples}):
        pairs = [(s, c) for s, c in zip(samples, checks) if _axis(s) == axis]
        report["by_axis"][axis] = _rates(pairs, blind, [s for s in test if _axis(s) == axis], n_opts, prior)
        report["by_axis"][axis]["unique_images"] = len({(split, f.image) for split in data for s in data[split]
                                                         if _axis(s) == axis for v in s.views for f in v.frames})
        for gran in sorted({s.granularity for s, _ in pairs}):
            sub = [(s, c) for s, c in pairs if s.granularity == gran]
            t_sub = [s for s in test if _axis(s) == axis and s.granularity == gran]
            report["by_axis_granularity"][f"{axis}/{gran}"] = _rates(sub, blind, t_sub, n_opts, prior)
    by_task: dict[str, dict] = defaultdict(dict)
    for name in sorted({s.task for s in samples}):
        ss = [(s, c) for s, c in zip(samples, checks) if s.task == name]
        t_test = [s for s in test if s.task == name]
        vals = Counter(s.options[s.answer_index] for s, _ in ss)
        by_task[name] = {
            "n": len(ss), "subset": ss[0][0].subset, "axis": ss[0][0].axis, "granularity": ss[0][0].granularity,
            "verified_rate": round(float(np.mean([c["svi"] and c["cvr"] for _, c in ss])), 4),
            "oracle_acc": round(float(np.mean([c["oracle_correct"] for _, c in ss])), 4),
            "blind_acc_test": round(blind.accuracy(t_test), 4) if t_test else None,
            "option_prior_acc_test": round(prior.accuracy(t_test), 4) if t_test else None,
            "letter_hist": _hist([s.answer for s, _ in ss], n_opts),
            "answer_values": dict(sorted(vals.items())),
            "distractor_types": dict(sorted(Counter(t for s, _ in ss for t in s.distractors.values()).items())),
        }
    report["by_task"] = dict(by_task)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(report, indent=1) + "\n")
    sheet = Path(sheet) if sheet else (Path(out).with_suffix(".png") if out else root / "contact_sheet.png")
    split = "test" if "test" in data else next(iter(data), None)
    if split is not None:
        examples, done = [], set()
        for s in data[split]:
            if s.task not in done:
                done.add(s.task)
                examples.append((root / split, s))
        spatial = [e for e in examples if _axis(e[1]) == "spatial"]
        temporal = [e for e in examples if e[1].axis == "temporal"]
        contact_sheet(spatial or temporal, sheet)
        report["contact_sheet"] = str(sheet)
        if spatial and temporal:  # temporal strips are tall: a sheet of their own next to the first
            t_sheet = sheet.with_name(sheet.stem + "_temporal" + sheet.suffix)
            contact_sheet(temporal, t_sheet)
            report["contact_sheet_temporal"] = str(t_sheet)
    return report
