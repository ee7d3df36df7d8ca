"""Each image's entity records for a benchmark split: predicted once by the shipped perception and
cached, or the generator's truth for the entity ceiling.

    records = split_records(bench_root, "train", perception_folder, "data/cache")   # predicted
    records = split_records(bench_root, "test", None, ...)                          # the truth (ceiling)

The return value maps scene id -> image (its path relative to the split, or for the truth its
stem) -> entity records (``bench/entities.py``), what ``inputs.entity_batch.build_entity_item``
reads. Predicted records are cached under ``<cache_dir>/records/<perception hash>/<split hash>.jsonl.gz``:
the perception's hash is the sha256 of its weights and settings, the split's that of its
benchmark file, so new heads or a regenerated split never read stale records, and the tower runs
once per image and perception (plain heads read its levels through the feature cache).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from bench.format import Benchmark, load_benchmark
from inputs.entity_batch import load_entity_labels, load_predicted_records, with_true_ids, write_predicted_records

RECORDS_DIR = "records"


class PerceptionMismatch(ValueError):
    """A perception folder is not the one the cached records or a checkpoint were made with."""


def locate_perception(folder: str | Path, key: str = "perception.folder") -> Path:
    """The perception folder ``folder`` names (relative: the working directory, then the repository
    root). Raises FileNotFoundError naming ``key`` when it holds no perception heads."""
    from inputs.backbone import find_folder
    from inputs.perception import WEIGHTS
    found = find_folder(str(folder), WEIGHTS)
    if found is None:
        raise FileNotFoundError(f"{key}={folder}: no perception heads ({WEIGHTS}) there; the shipped ones are "
                                "checkpoints/perception/<name>, made by python -m pretrain.perception")
    return found


def perception_hash(folder: str | Path) -> str:
    """sha256 (hex) of a perception folder's weights and settings: the key of its records."""
    from inputs.perception import SETTINGS, WEIGHTS
    folder = locate_perception(folder)
    h = hashlib.sha256()
    for name in (WEIGHTS, SETTINGS):
        h.update((folder / name).read_bytes())
    return h.hexdigest()


def records_path(bench: Benchmark, perception_sha: str, cache_dir: str | Path) -> Path:
    """Where the predicted records of ``bench`` by the perception of ``perception_sha`` are cached."""
    split_sha = hashlib.sha256(Path(bench.file).read_bytes()).hexdigest()
    return Path(cache_dir) / RECORDS_DIR / perception_sha[:16] / f"{split_sha[:16]}.jsonl.gz"


def predicted_records(bench: Benchmark, perception_folder: str | Path, cache_dir: str | Path,
                      progress: bool = True) -> dict[str, list[dict]]:
    """Image path (relative to the split) -> records predicted by the perception heads; from the
    cache when there, else predicted for every image of the split and cached (atomically)."""
    folder = locate_perception(perception_folder)
    path = records_path(bench, perception_hash(folder), cache_dir)
    if path.is_file():
        return load_predicted_records(path)
    from inputs.perception import benchmark_images, load_perception, perception_source, predict_records, read_settings
    backbone, fine_layer, heads_cfg = read_settings(folder)
    source = perception_source(backbone, cache_dir, fine_layer, heads_cfg)
    heads = load_perception(folder, source, heads_cfg)
    if progress:
        print(f"[perception] predicting the entity records of {bench.root} ...", flush=True)
    pred = predict_records(heads, [p for p, _, _ in benchmark_images(bench)], source)
    base = Path(bench.root).resolve()
    rel = {str(Path(p).relative_to(base)): recs for p, recs in pred.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_predicted_records(path, rel)
    return rel


def split_records(bench_root: str | Path, split: str, perception_folder: str | Path | None, cache_dir: str | Path,
                  bench: Benchmark | None = None, progress: bool = True) -> dict[str, dict]:
    """Scene id -> image -> entity records of one split of a benchmark folder (``bench_root/<split>``).

    Args:
        perception_folder: the perception heads that predict the records; None: the generator's
            truth of the split (the entity ceiling; ``<bench_root>/labels/<split>.jsonl.gz``).
        bench: the split already loaded (or None: loaded here).
    Predicted records of the train split carry the ``id`` of the true entity each matches (-1: none),
    the targets of the pointer and association losses, where the train labels exist.
    """
    root = Path(bench_root)
    if perception_folder is None:
        return load_entity_labels(root, split, allow_eval_splits=True)
    bench = bench if bench is not None else load_benchmark(root / split, check_images=False)
    pred = predicted_records(bench, perception_folder, cache_dir, progress)
    if split == "train" and (root / "labels" / "train.jsonl.gz").is_file():
        pred = with_true_ids(pred, load_entity_labels(root, "train"))
    return {s.scene: pred for s in bench.samples}
