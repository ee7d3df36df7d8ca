"""The dataset card (README.md) of an ``export hf`` folder: Hub YAML metadata plus a short guide.

The YAML header follows the layout of public multi-image benchmarks on the Hub: one
``configs`` entry per parquet folder (``samples``, ``queries``) with its ``data_files`` per
split, ``dataset_info`` with every feature and the split sizes, and the ``license``,
``task_categories``, ``language``, ``tags`` and ``size_categories`` fields the Hub filters on.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

TASK_CATEGORIES = ["visual-question-answering", "multiple-choice"]
TAGS = ["multi-view", "multi-image", "cross-view-reasoning", "spatial-reasoning"]


def feature_yaml(name: str, feature) -> dict:
    """One ``dataset_info.features`` entry, as the Hub writes it (``dtype`` or nested ``list``)."""
    return {"name": name, **_feature_type(feature)}


def _feature_type(feature) -> dict:
    from datasets import Image, List, Value
    if isinstance(feature, Value):
        return {"dtype": feature.dtype}
    if isinstance(feature, Image):
        return {"dtype": "image"}
    if isinstance(feature, List):
        inner = _feature_type(feature.feature)
        return {"list": inner["dtype"] if set(inner) == {"dtype"} else inner}
    raise TypeError(f"no card form for feature {feature!r}")


def size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def card_metadata(title: str, cfg, counts: dict[str, dict[str, tuple[int, int]]], features: dict) -> dict:
    """The YAML header: configs (data files per split), features, sizes, license, categories.

    ``counts`` is {split: {config: (rows, parquet bytes)}}; the parquet size stands for both
    num_bytes and the download size (the images are stored as they are, uncompressed further).
    """
    configs, infos = [], []
    for config, feats in features.items():
        configs.append({"config_name": config,
                        "data_files": [{"split": split, "path": f"{config}/{split}-*.parquet"} for split in counts],
                        **({"default": True} if config == "samples" else {})})
        infos.append({"config_name": config, "features": [feature_yaml(k, v) for k, v in feats.items()],
                      "splits": [{"name": split, "num_bytes": c[config][1], "num_examples": c[config][0]}
                                 for split, c in counts.items()],
                      "download_size": sum(c[config][1] for c in counts.values()),
                      "dataset_size": sum(c[config][1] for c in counts.values())})
    n_samples = sum(c["samples"][0] for c in counts.values())
    return {"license": cfg.license, "pretty_name": title, "task_categories": TASK_CATEGORIES,
            "language": ["en"], "tags": TAGS, "size_categories": [size_category(n_samples)],
            "configs": configs, "dataset_info": infos}


def _table(counts: dict[str, dict[str, tuple[int, int]]]) -> str:
    rows = [f"| {split} | {c['samples'][0]} | {c['queries'][0]} |" for split, c in counts.items()]
    return "\n".join(["| split | samples | queries |", "|---|---|---|", *rows])


def _task_table(benches) -> str:
    tasks: Counter = Counter()
    subsets: Counter = Counter()
    for _, bench in benches:
        tasks.update(s.task for s in bench.samples)
        subsets.update(s.subset or "none" for s in bench.samples)
    rows = [f"| {task} | {n} |" for task, n in sorted(tasks.items())]
    sub = ", ".join(f"{k}: {v}" for k, v in sorted(subsets.items()))
    return "\n".join(["| task | samples |", "|---|---|", *rows, "", f"Subsets (SSMN): {sub}."])


def write_card(path: Path, title: str, cfg, counts: dict, features: dict, benches) -> None:
    """Write README.md: YAML metadata between ``---`` lines, then the guide."""
    meta = card_metadata(title, cfg, counts, features)
    protocol = (f"settings {','.join(cfg.settings) if cfg.settings else 'every one that applies (+0..+3, -1, all)'}, "
                f"seed {cfg.seed}, K_SVS {cfg.max_extra.get('SVS')}, K_MVN {cfg.max_extra.get('MVN')}, "
                f"-1 mode {cfg.minus_one}")
    first = next(iter(counts))
    body = f"""# {title}

A multi-view, multi-image multiple-choice benchmark in the cross-view format of this project
(bench/FORMAT.md): every question comes with its camera views, the views that make it
answerable (V_GT), an ordered pool of redundant extra views, typed distractors, evidence spans
and Set-of-Mark boxes.

{_table(counts)}

{_task_table(benches)}

## Configs

- `samples` (default): one row per sample, lossless. `images` holds every frame's original
  file bytes in view order, `image_paths` their paths in the benchmark folder; `views_json`
  (view ids, cameras K/R/t, frame times), `distractors_json`, `evidence_json`, `marks_json`
  and `meta_json` are JSON strings.
- `queries`: one row per planned query of the protocol ({protocol}). `view_ids` and
  `view_roles` ("gt", "extra", "view") give the views in presentation order, `images` the
  frames in the order of the `<image>` placeholders of `prompt` (the project's unified
  interleaved prompt), `key` the query id the evaluator uses. Images repeat across the
  settings of one sample.

```python
from datasets import load_dataset
samples = load_dataset("parquet", data_files="samples/{first}-*.parquet", split="train")
queries = load_dataset(".", "queries", split="{first}")  # from this folder, or the Hub repo id
```

## Evaluating

Rebuild the benchmark folder with `python -m bench import hf samples/{first}-*.parquet --preset
generic --out DIR` and run `python -m eval run --bench DIR --model ...`, which reports accuracy
per setting, distraction decay, the necessity gap, bootstrap intervals and the failure
taxonomy. `python -m bench export lmms-eval` and `python -m bench export vlmevalkit` write
task files for those harnesses; `python -m eval import ...` scores their outputs with the
same protocol.
"""
    header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    path.write_text(f"---\n{header}---\n\n{body}", encoding="utf-8")
