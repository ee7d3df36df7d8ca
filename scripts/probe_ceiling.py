"""The ceiling: what would PERFECT per-view perception give the default cross-view model?

    python -m scripts.probe_ceiling [--config configs/default.yaml] [--out runs/probe_ceiling.json]
        [--splits val test] [--baseline checkpoints/<random-backbone run>] [--workers 1]
        [--transfer READOUT] [key=value ...]

Why: with the shipped random tower the model learns only the cross-view pointer, and a probe
with direct labels cannot read counts or colours from its features. This script asks the
converse question: if every view's features said exactly what that view shows, how far would
the unchanged model and training (``training.run.train``, the code behind ``python train.py``)
get on the same questions? Tasks that stay low here are limited by the reasoning model or
by the number of training questions, not by the features.

What: a ground-truth "encoder" writes feature-cache entries (inputs/features.py, keyed by
its own identity string and each image's content hash, in its own subfolder of
``data.cache_dir``: real backbones' entries are never read or written). Per image, a grid of
the default backbone's size (10 x 10) over the frame; each cell is a perfect semantic map
at that resolution, one-hot (``bench.synth.semantic_grid``: the owning person's attributes, the
owning object, the view's count of seen people). The pooled vector is the mean over the cells. Identity is deliberately absent: matching
people across views is left to the model, as with a real tower.

The truth comes from rebuilding each scene with the generator config stored in the split's
benchmark.json (``bench.synth.generate.build_scene`` / ``build_temporal_scene``; scene id
s000123 / t000012 is index 123 / 12), rendering and observing it. Every clean image must equal
the rebuilt render pixel for pixel (a marked image: at least half its pixels), so a benchmark
generated from another config fails loudly instead of training on wrong truth. Marked images
(``<view>_m<key>.png``) carry the truth of their clean view, temporal frames (``<view>_fNN.png``)
the truth of that frame.

``--transfer READOUT`` also scores the model trained on the truth on the grid that a semantic
readout (``model.backbone.readout``, ``pretrain.fit_readout``) *predicts* from the config's
tower, in the same format (the readout's probabilities per cell, the pooled vector their mean):
does a reasoning model taught on clean features keep its answers when perception is imperfect?

The model is the default one except ``model.patch_dim`` / ``pooled_dim``, set to the
ground-truth width. The best epoch is chosen on val as in ``python train.py``, so the val
figures are slightly optimistic; the test figures are not.
"""
from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import os
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")

from bench.synth.semantic_grid import GRID, LAYOUT, OFFSET, WIDTH, view_features  # noqa: E402
from inputs.features import FeatureCache  # noqa: E402

VERSION = "ground-truth-v1"
_MARKED = re.compile(r"^(?P<view>.+)_m[0-9a-f]{12}$")


def scene_truth(synth_cfg, sid: str, grid: int = GRID) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Image stem ("cam2", "cam0_f03") -> (ground-truth cells, rebuilt RGB) of one scene."""
    from bench.synth.generate import build_scene, build_temporal_scene
    if not re.fullmatch(r"[st]\d{6}", sid):
        raise ValueError(f"scene id {sid!r} is not a synthetic scene id (s000123 / t000012)")
    out = {}
    if sid[0] == "s":
        scene, renders, obs, _ = build_scene(synth_cfg, int(sid[1:]))
        for v, r in renders.items():
            out[v] = (view_features(scene, r, obs[v], 0.0, grid), r.rgb)
    else:
        scene, renders, obs, _ = build_temporal_scene(synth_cfg, int(sid[1:]))
        for v, rs in renders.items():
            for f, (r, t) in enumerate(zip(rs, scene.times)):
                out[f"{v}_f{f:02d}"] = (view_features(scene, r, obs[v][f], t, grid), r.rgb)
    return out


def _scene_job(args) -> dict:
    return scene_truth(*args)


def image_features(path: Path, truth: dict[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The ground-truth cells of one benchmark image, after checking it against the rebuild."""
    stem = path.stem
    marked = _MARKED.match(stem)
    key = stem if stem in truth else marked.group("view") if marked and marked.group("view") in truth else None
    if key is None:
        raise ValueError(f"{path}: no view or frame {stem!r} in the rebuilt scene ({', '.join(sorted(truth))})")
    feats, rgb = truth[key]
    with Image.open(path) as img:
        pixels = np.asarray(img.convert("RGB"))
    if pixels.shape != rgb.shape:
        raise ValueError(f"{path}: {pixels.shape[1]}x{pixels.shape[0]} px, the rebuilt scene renders "
                         f"{rgb.shape[1]}x{rgb.shape[0]}: not generated from its benchmark.json config")
    match = float((pixels == rgb).all(-1).mean())
    # marks draw thin boxes and small labels: most pixels of a marked image stay the render's
    if match < (1.0 if key == stem else 0.5):
        raise ValueError(f"{path}: only {100 * match:.1f} % of its pixels equal the scene rebuilt from its "
                         "benchmark.json config: the ground truth would not describe this image")
    return feats


class GroundTruthEncoder:
    """Stands in for the backbone where the cache needs one: its identity (no pixels are read)."""

    cfg: Any = None

    def __init__(self, grid: int = GRID):
        self.grid = grid

    @property
    def identity(self) -> str:
        return f"{VERSION}-grid{self.grid}-" + ",".join(f"{n}:{w}" for n, w in LAYOUT)

    def __call__(self, images):
        raise RuntimeError("the ground-truth encoder reads scenes, not pixels")


class GroundTruthCache(FeatureCache):
    """A FeatureCache whose missing entries come from the rebuilt scenes, not from a tower.

    Args:
        root: cache folder; entries go to ``root/<digest of the ground-truth identity>/``.
        grid: cells per side.
        workers: processes rebuilding scenes (1: this process only).
    """

    def __init__(self, root: str | Path, grid: int = GRID, workers: int = 1):
        super().__init__(root, GroundTruthEncoder(grid), batch_size=512)
        self.grid, self.workers = grid, workers
        self._configs: dict[Path, Any] = {}
        self._recent: dict[tuple, dict] = {}  # the last scenes built: one may straddle two chunks

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """The ground-truth map's shapes (the cache's shape check; no tower to run)."""
        return {"patch_tokens": (self.grid * self.grid, WIDTH), "pooled": (WIDTH,)}

    def synth_config(self, split_root: Path):
        """The generator config stored in a split's benchmark.json."""
        if split_root not in self._configs:
            from common.config import from_dict
            from bench.synth.config import SynthConfig
            file = split_root / "benchmark.json"
            if not file.is_file():
                raise FileNotFoundError(f"{file}: missing; the ground truth needs the generator config stored there")
            doc = json.loads(file.read_text())
            if "config" not in doc:
                raise ValueError(f"{file}: no 'config' field: not written by python -m bench generate")
            self._configs[split_root] = from_dict(SynthConfig, doc["config"])
        return self._configs[split_root]

    def _encode(self, paths: list[Path]) -> dict[str, torch.Tensor]:
        scene_of = [(p.parents[2], p.parent.name) for p in paths]  # <split>/images/<scene>/<file>
        todo = [key for key in dict.fromkeys(scene_of) if key not in self._recent]
        jobs = [(self.synth_config(root), sid, self.grid) for root, sid in todo]
        if self.workers > 1 and len(jobs) > 1:
            # one process per core: intra-op threads in the workers would only contend
            with mp.get_context("fork").Pool(min(self.workers, len(jobs)), initializer=torch.set_num_threads,
                                             initargs=(1,)) as pool:
                built = pool.map(_scene_job, jobs, chunksize=1)
        else:
            # renders are many small ray casts: on a shared machine two intra-op threads made a
            # a scene ~8x slower than one (32 s against 4.6 s for a spatial scene at load 10)
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                built = [scene_truth(*job) for job in jobs]
            finally:
                torch.set_num_threads(threads)
        truth = {**self._recent, **dict(zip(todo, built))}
        feats = np.stack([image_features(p, truth[key]) for p, key in zip(paths, scene_of)])
        self._recent = {key: truth[key] for key in list(dict.fromkeys(scene_of))[-2:]}
        self.n_encoded += len(paths)
        patch = torch.from_numpy(feats)
        return {"patch_tokens": patch, "pooled": patch.mean(1)}


class CellMeanPooled:
    """A tower with a readout (``backbone.readout_only``) whose pooled vector is the mean of its
    cells, as the ground truth's is: the predicted grid in exactly the ceiling's input format."""

    def __init__(self, encoder):
        self.encoder, self.cfg = encoder, encoder.cfg

    @property
    def identity(self) -> str:
        return f"{self.encoder.identity}|pooled=cell-mean"

    def __call__(self, images):
        cells = self.encoder(images)["patch_tokens"]
        return {"patch_tokens": cells, "pooled": cells.float().mean(1).to(cells.dtype)}


def predicted_cache(cfg, readout: str) -> FeatureCache:
    """The feature cache of ``cfg``'s tower with ``readout`` as its only output (``--transfer``)."""
    from inputs.backbone import build_backbone
    backbone_cfg = copy.deepcopy(cfg.model.backbone)
    backbone_cfg.readout, backbone_cfg.readout_only = readout, True
    backbone = build_backbone(backbone_cfg)
    layout = [tuple(b) for b in backbone.readout.layout] if hasattr(backbone.readout, "layout") else None
    if backbone.patch_dim != WIDTH or (layout is not None and layout != [tuple(b) for b in LAYOUT]):
        raise ValueError(f"--transfer {readout}: the readout predicts {backbone.patch_dim} values per cell "
                         f"in layout {layout}, the ground truth has {WIDTH} in {LAYOUT}")
    return FeatureCache(cfg.data.cache_dir, CellMeanPooled(backbone))


# ----------------------------------------------------------------------------- the run

FIGURES = ("acc", "acc_n", "acc_chance", "by_task", "by_task_n", "by_task_chance", "by_task_setting",
           "by_axis_granularity", "by_axis_granularity_n", "delta_dis", "necessity_gap")


def figures(summary: dict) -> dict:
    """The evaluator summary's accuracy figures (points) that the ceiling table needs."""
    out = {k: summary.get(k) for k in FIGURES}
    out["bench"] = summary.get("run", {}).get("bench")
    return out


def load_baseline(path: str | Path) -> dict:
    """Figures of a finished run (``python train.py`` folder, its metrics.json or a summary.json)."""
    path = Path(path)
    file = path / "metrics.json" if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(f"--baseline {path}: no metrics.json / summary.json there")
    summary = json.loads(file.read_text())
    if "by_task" not in summary:
        raise ValueError(f"--baseline {file}: no evaluator figures (by_task); was eval.enabled false?")
    return figures(summary)


def _cell(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown_table(columns: dict[str, dict]) -> str:
    """Rows: every task at its primary setting (+0), then subsets / axes / settings; one column
    per figures dict, with the first column's question counts."""
    names = list(columns)
    first = columns[names[0]]
    tasks = sorted({t for c in columns.values() for t in (c.get("by_task") or {})})
    header = f"| task (+0) | n | {' | '.join(names)} | chance |"
    lines = [header, "|" + "---|" * (len(names) + 3)]
    chance = first.get("by_task_chance") or {}
    for task in tasks:
        vals = [_cell((c.get("by_task") or {}).get(task)) for c in columns.values()]
        lines.append(f"| {task} | {(first.get('by_task_n') or {}).get(task, '-')} | {' | '.join(vals)} "
                     f"| {_cell(chance.get(task))} |")
    rows = [(f"{subset} {setting}", lambda c, s=setting, b=subset: ((c.get("acc") or {}).get(s) or {}).get(b),
             lambda c, s=setting, b=subset: ((c.get("acc_n") or {}).get(s) or {}).get(b))
            for setting in ("+0", "+2", "-1") for subset in ("SVS", "MVN", "overall")]
    rows += [(f"{axis} (+0)", lambda c, a=axis: ((c.get("by_axis_granularity") or {}).get(a) or {}).get("all"),
              lambda c, a=axis: ((c.get("by_axis_granularity_n") or {}).get(a) or {}).get("all"))
             for axis in ("spatial", "temporal")]
    rows += [("delta_dis", lambda c: c.get("delta_dis"), lambda c: None),
             ("necessity gap", lambda c: c.get("necessity_gap"), lambda c: None)]
    for name, get, count in rows:
        vals = [_cell(get(c)) for c in columns.values()]
        if all(v == "-" for v in vals):
            continue
        lines.append(f"| **{name}** | {count(first) or ''} | {' | '.join(vals)} | |")
    return "\n".join(lines)


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--out", default="runs/probe_ceiling.json")
    parser.add_argument("--splits", nargs="+", default=["val", "test"],
                        help="splits scored with the best checkpoint (the first one by train() itself)")
    parser.add_argument("--baseline", action="append", default=[], metavar="RUN",
                        help="a finished run (folder or metrics.json) to put beside the ceiling; repeatable")
    parser.add_argument("--grid", type=int, default=GRID, help="cells per side (the default backbone: 10)")
    parser.add_argument("--workers", type=int, default=1, help="processes rebuilding scenes")
    parser.add_argument("--cache-only", action="store_true", help="build the ground-truth cache and stop")
    parser.add_argument("--transfer", metavar="READOUT", default=None,
                        help="also score the ceiling model (trained on the truth) on the grid a readout "
                             "predicts from the config's tower (model.backbone.readout): the columns "
                             "'transfer <split>'")
    parser.add_argument("overrides", nargs="*", help="training config key=value overrides")
    args = parser.parse_args(argv)
    # --splits takes every word after it, so "--splits val trainer.max_epochs=40" would make the
    # override a split name; a split name has no "=": such words are overrides
    args.overrides += [s for s in args.splits if "=" in s]
    args.splits = [s for s in args.splits if "=" not in s]
    if not args.splits:
        parser.error("--splits: name at least one split (val, test)")
    return args


def main(argv: list[str] | None = None) -> int:
    from common.config import to_dict
    from bench.format import load_benchmark
    from inputs.checkpoint import read_checkpoint
    from inputs.items import split_images
    from inputs.text import build_tokenizer
    from training.config import load_train_config
    from training.module import CrossViewModule
    from training.run import evaluate_module, train

    args = parse_args(argv)
    cfg = load_train_config(args.config, args.overrides)
    # the model is built for the features it reads (the backbone settings are then unused)
    cfg.model.patch_dim = cfg.model.pooled_dim = WIDTH
    cfg.eval.split = args.splits[0]
    cache = GroundTruthCache(cfg.data.cache_dir, args.grid, args.workers)
    print(f"[ceiling] ground-truth features: {WIDTH} per cell, {args.grid}x{args.grid} cells; cache {cache.dir}",
          flush=True)
    baselines = {f"baseline {Path(b).name}": load_baseline(b) for b in args.baseline}
    started = time.time()
    if args.cache_only:
        from training.run import ensure_benchmark
        root = ensure_benchmark(cfg)
        for split in ("train", "val", "test"):
            table = cache.table(split_images(load_benchmark(root / split)), desc=f"ground truth {split}")
            print(f"[ceiling] {split}: {len(table.index)} images, {len(table.pooled)} distinct", flush=True)
        print(f"[ceiling] {cache.n_encoded} images built in {time.time() - started:.0f} s", flush=True)
        return 0
    tokenizer = build_tokenizer(cfg.model)
    metrics = train(cfg, "ceiling", components=(cache, tokenizer))
    if not cfg.eval.enabled:  # a stage (e.g. configs/track_stage.yaml): trained, nothing to score
        print(f"[ceiling] eval.enabled=false: trained on the ground-truth grid, not scored; run "
              f"{metrics['run_dir']} (a later run starts from it with init_from=<run>/best.ckpt)", flush=True)
        return 0
    run_dir = Path(metrics["run_dir"])
    results = {args.splits[0]: figures(metrics)}
    best = run_dir / "best.ckpt"
    module = CrossViewModule(to_dict(cfg))
    module.load_state_dict(read_checkpoint(best if best.is_file() else run_dir / "last.ckpt")["state_dict"])
    module.eval()
    for split in args.splits[1:]:
        split_cfg = copy.deepcopy(cfg)
        split_cfg.eval.split = split
        results[split] = figures(evaluate_module(module, cache, tokenizer, split_cfg, run_dir / f"eval_{split}"))
    transfer = {}
    if args.transfer:
        tcache = predicted_cache(cfg, args.transfer)
        print(f"[ceiling] transfer: the readout's predicted grid, cache {tcache.dir}", flush=True)
        for split in args.splits:
            split_cfg = copy.deepcopy(cfg)
            split_cfg.eval.split = split
            transfer[split] = figures(evaluate_module(module, tcache, tokenizer, split_cfg,
                                                      run_dir / f"eval_transfer_{split}"))
    columns = ({f"ceiling {s}": r for s, r in results.items()} | {f"transfer {s}": r for s, r in transfer.items()}
               | baselines)
    table = markdown_table(columns)
    report = {"identity": cache.identity, "width": WIDTH, "grid": args.grid,
              "layout": {n: [OFFSET[n], w] for n, w in LAYOUT}, "config": args.config,
              "overrides": args.overrides, "run_dir": str(run_dir), "fit_seconds": metrics.get("fit_seconds"),
              "best_val_acc": metrics.get("best_val_acc"), "seconds": round(time.time() - started, 1),
              "ceiling": results, "transfer": transfer,
              "transfer_readout": args.transfer, "baselines": baselines, "table_md": table}
    _write_json(Path(args.out), report)
    print(table)
    print(f"[ceiling] wrote {args.out} ({report['seconds']:.0f} s; run {run_dir})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
