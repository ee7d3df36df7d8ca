"""Harness bridges, export side: task files for lmms-eval and a VLMEvalKit MCQ TSV.

``python -m bench export lmms-eval DIR --out tasks/NAME`` writes

    tasks/NAME/queries/test-00000-of-00001.parquet   the `queries` config (bench/export_hf.py)
    tasks/NAME/NAME_plus0.yaml ... NAME_minus1.yaml  one task per setting (process_docs keeps its rows)
    tasks/NAME/NAME.yaml                             the group of all of them
    tasks/NAME/utils.py                              doc_to_visual / doc_to_text / process_results
    tasks/NAME/README.md

``python -m bench export vlmevalkit DIR --out FILE.tsv`` writes the TSV VLMEvalKit's custom
multiple-choice datasets read: ``index``, ``image`` (base64; a list written as text when a
query shows several images, with ``image_path`` naming them), ``question``, ``hint`` (which
image is which view), ``A``..``E``, ``answer``, ``category`` (task), ``l2-category``
(setting), plus ``key`` and ``view_order``, which VLMEvalKit carries into its prediction
file so ``python -m eval import vlmevalkit`` can match every answer to its query.

Both list the queries in the evaluator's plan order, with its keys; ``python -m eval import``
scores the harness outputs with this project's parser and protocol.
"""
from __future__ import annotations

import base64
import csv
import json
import re
from pathlib import Path

import yaml

from bench import prompt
from bench.constants import LETTERS
from bench.export_hf import QUERIES, ExportConfig, find_splits, query_rows, queries_features, write_shards
from bench.format import load_benchmark
from bench.protocol import setting_sort_key
from common.provenance import file_sha256

TEMPLATE = Path(__file__).parent / "templates" / "lmms_eval_utils.py.tmpl"
LMMS_MARKER = "utils.py"
TSV_OPTION_COLUMNS = LETTERS[:10]  # A..J: the option columns VLMEvalKit reads


def setting_slug(setting: str) -> str:
    """"+0" -> "plus0", "-1" -> "minus1", "all" -> "all": task names lmms-eval accepts."""
    return setting.replace("+", "plus").replace("-", "minus")


def _one_benchmark(path: str | Path):
    splits = find_splits(path)
    if len(splits) != 1:
        names = ", ".join(name for name, _ in splits)
        raise ValueError(f"{path}: holds several splits ({names}); give one split folder, e.g. {path}/test")
    return load_benchmark(splits[0][1])


def _function(name: str) -> str:
    return f"__FUNCTION__{name}"


def _yaml_text(doc: dict) -> str:
    """YAML with lmms-eval's ``!function module.name`` tags (written from placeholders)."""
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    return re.sub(r"'?__FUNCTION__([\w.]+)'?", r"!function \1", text)


def utils_source(name: str, settings: list[str]) -> str:
    """utils.py for the tasks: the template with bench/prompt.py's constants filled in."""
    constants = "\n".join(f"{k} = {v!r}" for k, v in (
        ("IMAGE_TOKEN", prompt.IMAGE_TOKEN), ("LETTERS", LETTERS), ("PROMPT_TEMPLATE", prompt.PROMPT_TEMPLATE),
        ("SCENE_NOTE_ONE", prompt.SCENE_NOTE_ONE), ("SCENE_NOTE_MANY", prompt.SCENE_NOTE_MANY)))
    functions = "\n".join(f"docs_{setting_slug(s)} = _only({s!r})" for s in settings)
    return (TEMPLATE.read_text().replace("@@NAME@@", name).replace("@@PROMPT_HASH@@", prompt.template_fingerprint())
            .replace("@@CONSTANTS@@", constants).replace("@@SETTING_FUNCTIONS@@", functions))


def task_yaml(name: str, setting: str, data: dict, meta: dict) -> str:
    doc = {"task": f"{name}_{setting_slug(setting)}", **data, "output_type": "generate_until",
           "process_docs": _function(f"utils.docs_{setting_slug(setting)}"),
           "doc_to_visual": _function("utils.doc_to_visual"), "doc_to_text": _function("utils.doc_to_text"),
           "doc_to_target": "answer", "process_results": _function("utils.process_results"),
           "metric_list": [{"metric": "accuracy", "aggregation": "mean", "higher_is_better": True}],
           "generation_kwargs": {"max_new_tokens": 32, "temperature": 0, "do_sample": False},
           "lmms_eval_specific_kwargs": {"default": {"pre_prompt": "", "post_prompt": "", "image_placeholder": "<image>"}},
           "metadata": {"version": 0.0, "setting": setting, **meta}}
    return _yaml_text(doc)


def group_yaml(name: str, tasks: list[str]) -> str:
    return _yaml_text({"group": name, "task": tasks,
                       "aggregate_metric_list": [{"metric": "accuracy", "aggregation": "mean", "weight_by_size": True}],
                       "metadata": {"version": 0.0}})


def export_lmms_eval(path: str | Path, out: str | Path, cfg: ExportConfig | None = None, name: str | None = None,
                     dataset_path: str | None = None, overwrite: bool = False) -> dict:
    """Write an lmms-eval task folder (see the module docstring).

    Args:
        dataset_path: a Hub repo holding an ``export hf`` of the same benchmark; the tasks then
            read its ``queries`` config instead of the parquet written next to them.
    Returns:
        {"tasks": [task names], "group": name, "queries": n, "out": str}
    """
    from bench.outdir import staged_dir
    cfg = cfg or ExportConfig()
    bench = _one_benchmark(path)
    out = Path(out)
    name = re.sub(r"\W", "_", name or out.name)
    sha = file_sha256(bench.file)
    with staged_dir(out, overwrite=overwrite, marker=LMMS_MARKER) as tmp:
        seen: set[str] = set()

        def rows():
            for row in query_rows(bench, cfg, sha):
                seen.add(row["setting"])
                yield row

        n_rows, _ = write_shards(rows(), queries_features(), tmp / QUERIES, "test", cfg.shard_mb)
        settings = sorted(seen, key=setting_sort_key)
        if dataset_path:
            data = {"dataset_path": dataset_path, "dataset_name": QUERIES, "test_split": "test"}
        else:
            data = {"dataset_path": "parquet",
                    "dataset_kwargs": {"data_files": {"test": str((out / QUERIES / "test-*.parquet").resolve())}},
                    "test_split": "test"}
        meta = {"bench_sha256": sha, "seed": cfg.seed}
        tasks = []
        for setting in settings:
            tasks.append(f"{name}_{setting_slug(setting)}")
            (tmp / f"{tasks[-1]}.yaml").write_text(task_yaml(name, setting, data, meta))
        (tmp / f"{name}.yaml").write_text(group_yaml(name, tasks))
        (tmp / "utils.py").write_text(utils_source(name, settings))
        (tmp / "README.md").write_text(
            f"# lmms-eval tasks: {name}\n\nOne task per view setting ({', '.join(settings)}), grouped as `{name}`; "
            f"{n_rows} queries from `{bench.file}` (sha256 {sha[:12]}).\n\n```bash\n"
            f"python -m lmms_eval --model MODEL --model_args ... --tasks {name} --include_path {out} "
            f"--log_samples --output_path logs/\n"
            f"python -m eval import lmms-eval logs/*/*_samples_{name}_*.jsonl --bench {bench.root} --out runs/MODEL\n```\n")
    return {"tasks": tasks, "group": name, "queries": n_rows, "out": str(out)}


def _hint(view_frame_times: list[list[float]]) -> str:
    """Which image is which view, for a harness that puts every image before the question."""
    n_images = sum(len(t) for t in view_frame_times)
    if all(len(t) == 1 for t in view_frame_times):
        if len(view_frame_times) == 1:
            return "The image shows the scene from one camera."
        return (f"The {n_images} images are {n_images} views of the same scene from different cameras, "
                f"given in an arbitrary order.")
    if len(view_frame_times) == 1:
        times = view_frame_times[0]
        return f"The {n_images} images are frames of one camera over time (t={times[0]:g}s to {times[-1]:g}s)."
    parts, first = [], 1
    for pos, times in enumerate(view_frame_times, 1):
        last = first + len(times) - 1
        parts.append(f"View {pos}: images {first}-{last} (t={times[0]:g}s to {times[-1]:g}s)")
        first = last + 1
    return ("The images show the same scene from different cameras over time, view by view, views in an "
            "arbitrary order. " + "; ".join(parts) + ".")


def export_vlmevalkit(path: str | Path, out: str | Path, cfg: ExportConfig | None = None,
                      overwrite: bool = False) -> dict:
    """Write the VLMEvalKit MCQ TSV (see the module docstring); returns {"queries": n, "out": str}."""
    import os
    import tempfile
    from bench.import_hf import image_format
    cfg = cfg or ExportConfig()
    bench = _one_benchmark(path)
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out}: exists; pass --overwrite or choose a new --out file")
    rows = list(query_rows(bench, cfg, file_sha256(bench.file)))
    n_opt = max(len(r["options"]) for r in rows)
    header = ["index", "image", "image_path", "question", "hint", *TSV_OPTION_COLUMNS[:n_opt], "answer", "category",
              "l2-category", "key", "sample_id", "setting", "view_order"]
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
            writer.writerow(header)
            for index, row in enumerate(rows):
                blobs = [im["bytes"] for im in row["images"]]
                b64 = [base64.b64encode(b).decode("ascii") for b in blobs]
                names = [f"{index}_{k}{image_format(b)}" for k, b in enumerate(blobs)]
                image, image_path = (b64[0], "") if len(b64) == 1 else (str(b64), str(names))
                options = row["options"] + [""] * (n_opt - len(row["options"]))
                writer.writerow([index, image, image_path, row["question"], _hint(row["view_frame_times"]), *options,
                                 row["answer"], row["task"], row["setting"], row["key"], row["sample_id"],
                                 row["setting"], json.dumps(row["view_ids"])])
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"queries": len(rows), "out": str(out)}
