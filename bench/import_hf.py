"""``python -m bench import hf FILE ... --preset NAME --out DIR``: public multi-image benchmarks
(parquet / JSON / JSONL, as the Hub serves them) into this project's benchmark format.

Rows are read with pyarrow (parquet) or json; images may be HF image structs
(``{"bytes", "path"}``), raw bytes, base64 strings or paths relative to the file's folder, one
per column or a list in one column. Each image keeps its original bytes and becomes one view
with one frame. The column layouts of the presets are in bench/import_presets.py.

A ``samples`` export of this project (``python -m bench export hf``) is restored losslessly:
same samples, same image paths, same bytes. The folder is validated before it replaces DIR;
on any problem nothing is written and every problem is listed, one line each.
"""
from __future__ import annotations

import base64
import binascii
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from bench.import_presets import PRESETS, ColumnMap, answer_letter, split_question_options

LOSSLESS_COLUMNS = {"views_json", "image_paths", "images", "distractors_json"}
READABLE = (".parquet", ".json", ".jsonl")
IMAGE_EXT = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp", "GIF": ".gif", "BMP": ".bmp", "TIFF": ".tif"}


class ImportHFError(ValueError):
    """The import cannot finish; ``problems`` has one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems[:50]))


@dataclass(frozen=True)
class Row:
    file: Path
    number: int  # 1-based row within its file
    data: dict[str, Any]

    def where(self, sample_id: str | None = None) -> str:
        return f"{self.file}:row {self.number}" + (f" ({sample_id})" if sample_id else "")


def expand_inputs(paths: list[str | Path]) -> list[Path]:
    """Files as given; a folder stands for every parquet / JSON / JSONL file under it, sorted."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in READABLE and f.is_file())
        else:
            files.append(p)
    return files


def read_rows(file: Path) -> Iterator[Row]:
    """The rows of one file as dicts; parquet is streamed in batches."""
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq
        number = 0
        for batch in pq.ParquetFile(file).iter_batches(batch_size=64):
            for data in batch.to_pylist():
                number += 1
                yield Row(file, number, data)
    elif file.suffix == ".jsonl":
        with open(file, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if line.strip():
                    yield Row(file, number, json.loads(line))
    elif file.suffix == ".json":
        data = json.loads(file.read_text(encoding="utf-8"))
        if isinstance(data, dict):  # {"data": [...]} or {split: [...]}: the one list inside
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else data
        if not isinstance(data, list):
            raise ImportHFError([f"ERROR {file}: expected a list of records (or an object holding one list)"])
        for number, rec in enumerate(data, 1):
            yield Row(file, number, rec)
    else:
        raise ImportHFError([f"ERROR {file}: cannot read {file.suffix or 'a file without suffix'}; "
                             f"use {', '.join(READABLE)}"])


# ---------------------------------------------------------------- images


def image_bytes(value: Any, base: Path) -> list[bytes]:
    """Every image in a cell: HF struct, bytes, base64 text, a path (relative to ``base``) or a list."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [b for v in value for b in image_bytes(v, base)]
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return [bytes(value["bytes"])]
        if value.get("path"):
            return image_bytes(str(value["path"]), base)
        return []
    if isinstance(value, (bytes, bytearray, memoryview)):
        return [bytes(value)]
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):  # a list written as text (VLMEvalKit TSV)
            try:
                return image_bytes(json.loads(text.replace("'", '"')), base)
            except json.JSONDecodeError:
                pass
        path = Path(text) if Path(text).is_absolute() else base / text
        if len(text) < 1024 and path.is_file():
            return [path.read_bytes()]
        if len(text) > 64:
            try:
                return [base64.b64decode(text, validate=True)]
            except (binascii.Error, ValueError):
                pass
        raise ValueError(f"image {text[:60]!r} is neither a file under {base} nor base64")
    raise ValueError(f"cannot read an image from a {type(value).__name__}")


def image_format(data: bytes) -> str:
    """The file suffix of encoded image bytes; ValueError when Pillow cannot read them."""
    from PIL import Image, UnidentifiedImageError
    try:
        with Image.open(io.BytesIO(data)) as im:
            fmt = im.format or ""
            im.verify()
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise ValueError(f"not a readable image ({err})") from None
    return IMAGE_EXT.get(fmt, "." + fmt.lower() if fmt else ".img")


def safe_name(text: str) -> str:
    return re.sub(r"[^\w\-.]", "_", text).strip(".") or "x"


# ---------------------------------------------------------------- rows -> samples


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    return text or None


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN from pandas-made files
        return None
    return value


def lossless_sample(row: Row) -> tuple[dict, dict[str, bytes]]:
    """A sample and its {relative path: bytes} from a ``samples`` export row."""
    d = row.data
    sample = {"id": d["id"], "task": d["task"], "subset": d.get("subset"), "axis": d.get("axis"),
              "granularity": d.get("granularity"), "scene": d.get("scene"),
              "views": json.loads(d["views_json"]), "gt_views": list(d["gt_views"]),
              "extra_views": list(d.get("extra_views") or []), "question": d["question"],
              "options": list(d["options"]), "answer": d["answer"],
              "distractors": json.loads(d.get("distractors_json") or "{}"),
              "evidence": json.loads(d.get("evidence_json") or "[]"),
              "marks": json.loads(d.get("marks_json") or "[]"), "meta": json.loads(d.get("meta_json") or "{}")}
    images = {}
    for rel, im in zip(d["image_paths"], d["images"]):
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts:
            raise ValueError(f"image path {rel!r} leaves the benchmark folder")
        images[rel] = bytes(im["bytes"]) if isinstance(im, dict) else bytes(im)
    return sample, images


def mapped_sample(row: Row, cmap: ColumnMap, image_root: Path | None = None) -> tuple[dict, dict[str, bytes]]:
    """A sample and its images from a row of a public benchmark, through the column map.

    Relative image paths are read under ``image_root`` (default: the row's file's folder).
    """
    d, preset = row.data, cmap.preset
    columns = set(d)

    def get(name: str, required: bool = True) -> Any:
        cols = cmap.resolve(name, columns)
        if cols is None:
            if required:
                raise ValueError(f"{name}: no column {' or '.join(cmap.candidates(name)) or '(none mapped)'}; "
                                 f"columns are {', '.join(sorted(columns))}; use --map {name}=COLUMN")
            return None
        return [d[c] for c in cols] if len(cols) > 1 else d[cols[0]]

    raw_id = _text(get("id"))
    if raw_id is None:
        raise ValueError("id: empty")
    sid = f"{preset.prefix}{raw_id}" if preset.prefix and not raw_id.startswith(preset.prefix) else raw_id
    question = _text(get("question")) or ""
    if preset.options_in_question and "options" not in cmap.overrides:
        split = split_question_options(question)
        if split is None:
            raise ValueError("question: no options (A:, B:, ...) written into the question text")
        question, options = split
    else:
        options = get("options")
        if isinstance(options, str):
            options = json.loads(options) if options.strip().startswith("[") else [options]
        options = [t for t in (_text(o) for o in options or []) if t is not None]
    answer = answer_letter(get("answer"), options)
    if answer is None:
        raise ValueError(f"answer: {get('answer')!r} is not a letter or an option of {options}")
    blobs = image_bytes(get("images"), image_root or row.file.parent)
    if not blobs:
        raise ValueError("images: the row has no image")
    images, views = {}, []
    for k, blob in enumerate(blobs, 1):
        rel = f"images/{safe_name(sid)}/{k}{image_format(blob)}"
        images[rel] = blob
        views.append({"view_id": f"img{k}", "frames": [{"t": 0.0, "image": rel}]})
    meta = {"source_file": row.file.name, "source_row": row.number, "preset": preset.name}
    meta.update({c: _jsonable(d[c]) for c in preset.meta if c in d and d[c] is not None})
    return {"id": sid, "task": _text(get("task", required=False)) or preset.name,
            "subset": _text(get("subset", required=False)), "axis": _text(get("axis", required=False)),
            "granularity": _text(get("granularity", required=False)), "scene": _text(get("scene", required=False)),
            "views": views, "gt_views": [v["view_id"] for v in views], "extra_views": [],
            "question": question, "options": options, "answer": answer, "meta": meta}, images


# ---------------------------------------------------------------- command


def import_hf(files: list[str | Path], out: str | Path, preset: str = "generic", overrides: dict[str, str] | None = None,
              name: str | None = None, skip_invalid: bool = False, overwrite: bool = False,
              image_root: str | Path | None = None) -> dict:
    """Convert benchmark files into a benchmark folder at ``out``.

    Args:
        files: parquet / JSON / JSONL files, or folders of them.
        out: the benchmark folder to write (benchmark.json and images/).
        preset: a key of bench.import_presets.PRESETS.
        overrides: {field: column(s)} from ``--map``.
        skip_invalid: drop rows that cannot be converted (reported) instead of failing.
        image_root: folder that relative image paths are read under (default: each file's folder).
    Returns:
        {"samples": n, "skipped": [problem lines], "out": str}
    Raises:
        ImportHFError: unreadable input, or rows that cannot be converted (without skip_invalid).
    """
    from bench.format import validate_benchmark
    from bench.outdir import OutDirError, staged_dir
    if preset not in PRESETS:
        raise ImportHFError([f"ERROR --preset {preset!r}: one of {', '.join(PRESETS)}"])
    cmap = ColumnMap(PRESETS[preset], dict(overrides or {}))
    paths = expand_inputs(files)
    problems = [f"ERROR {p}: no such file" for p in paths if not p.is_file()]
    if not paths:
        problems.append("ERROR import hf: no input files")
    if problems:
        raise ImportHFError(problems)
    samples, images, skipped, seen = [], {}, [], {}
    for file in paths:
        for row in read_rows(file):
            if not isinstance(row.data, dict):
                problems.append(f"ERROR {row.where()}: a row must be an object")
                continue
            if {"key", "prompt", "view_ids"} <= set(row.data):
                raise ImportHFError([f"ERROR {file}: a `queries` export (one row per query); import the "
                                     f"`samples` config instead"])
            try:
                lossless = preset == "generic" and LOSSLESS_COLUMNS <= set(row.data) and not cmap.overrides
                sample, imgs = (lossless_sample(row) if lossless else
                                mapped_sample(row, cmap, Path(image_root) if image_root else None))
                if sample["id"] in seen:
                    raise ValueError(f"id: {sample['id']!r} repeats {seen[sample['id']]}")
            except (ValueError, KeyError, TypeError) as err:
                line = f"ERROR {row.where(row.data.get('id') if lossless else None)}: {err}"
                (skipped if skip_invalid else problems).append(line)
                continue
            seen[sample["id"]] = row.where()
            samples.append(sample)
            images.update(imgs)
    if problems:
        raise ImportHFError(problems)
    if not samples:
        raise ImportHFError(["ERROR import hf: no sample could be converted"] + skipped[:20])
    title = name or Path(out).name
    try:
        with staged_dir(out, overwrite=overwrite) as tmp:
            for rel, blob in images.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).write_bytes(blob)
            doc = {"name": title, "source": {"preset": preset, "files": [str(p) for p in paths],
                                             "map": dict(cmap.overrides)}, "samples": samples}
            (tmp / "benchmark.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            found, _ = validate_benchmark(tmp)
            if found:
                raise ImportHFError([p.line().replace(str(tmp), str(out)) for p in found])
    except OutDirError as err:
        raise ImportHFError([f"ERROR --out {err}"]) from None
    return {"samples": len(samples), "skipped": skipped, "out": str(out)}
