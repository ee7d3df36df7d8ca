"""Read the raw answers of another harness's run: lmms-eval logged samples, VLMEvalKit predictions.

- lmms-eval (``--log_samples``): JSONL, one line per document with ``doc`` (the row minus its
  images: our ``key`` and ``view_ids`` survive), ``resps`` ([[text]]) and ``filtered_resps``
  ([text]); older versions wrote one JSON object with a ``logs`` list of the same records.
- VLMEvalKit: the prediction file of a custom MCQ dataset (``{model}_{dataset}.xlsx``, or
  .tsv / .csv / .json): the TSV's columns minus ``image``, plus ``prediction``. Our export's
  ``key`` and ``view_order`` columns come back with it; without them ``index`` is used.

Each reader returns one ``HarnessAnswer`` per answer, with where it came from for error lines.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator


@dataclass(frozen=True)
class HarnessAnswer:
    where: str  # "file:line N" for error messages
    raw: str  # the model's raw output
    key: str | None = None  # the evaluator's query key, when the file carries it
    index: int | None = None  # VLMEvalKit row index (plan order), used only without a key
    view_order: tuple[str, ...] | None = None  # view ids in presentation order, when carried


class HarnessFileError(ValueError):
    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _text(value: Any) -> str:
    while isinstance(value, (list, tuple)):
        value = value[0] if value else ""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def _view_order(value: Any) -> tuple[str, ...] | None:
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else None


def _key(value: Any) -> str | None:
    text = _text(value).strip()
    return text or None


def _lmms_records(path: Path) -> Iterator[tuple[str, dict]]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("{") and path.suffix == ".json":
        obj = json.loads(text)
        logs = obj.get("logs") if isinstance(obj, dict) else None
        if not isinstance(logs, list):
            raise HarnessFileError([f"ERROR {path}: a .json file must hold a `logs` list (lmms-eval samples)"])
        for i, rec in enumerate(logs, 1):
            yield f"{path}:logs[{i}]", rec
        return
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield f"{path}:line {i}", json.loads(line)
            except json.JSONDecodeError as err:
                raise HarnessFileError([f"ERROR {path}:line {i}: invalid JSON ({err})"]) from None


def read_lmms_eval(path: str | Path) -> list[HarnessAnswer]:
    """Answers of an lmms-eval samples file (JSONL, or JSON with ``logs``)."""
    path = Path(path)
    out = []
    for where, rec in _lmms_records(path):
        if not isinstance(rec, dict):
            raise HarnessFileError([f"ERROR {where}: expected an object"])
        doc = rec.get("doc") if isinstance(rec.get("doc"), dict) else {}
        raw = rec.get("filtered_resps")
        if raw is None or raw == []:
            raw = rec.get("resps")
        out.append(HarnessAnswer(where=where, raw=_text(raw), key=_key(doc.get("key")),
                                 view_order=_view_order(doc.get("view_ids"))))
    return out


def _table_rows(path: Path) -> list[dict]:
    """Rows of an .xlsx / .tsv / .csv / .json prediction table, as dicts."""
    suffix = path.suffix.lower()
    if suffix == ".xlsx":
        from openpyxl import load_workbook
        book = load_workbook(path, read_only=True, data_only=True)
        rows = list(book.worksheets[0].iter_rows(values_only=True))
        book.close()
        if not rows:
            return []
        header = [str(h) if h is not None else "" for h in rows[0]]
        return [dict(zip(header, r)) for r in rows[1:]]
    if suffix in (".tsv", ".csv"):
        csv.field_size_limit(1 << 30)  # base64 image columns are long
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ","))
    if suffix == ".json":
        obj = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(obj, list):
            return obj
        if isinstance(obj, dict) and obj and all(isinstance(v, (dict, list)) for v in obj.values()):
            columns = {k: (list(v.values()) if isinstance(v, dict) else v) for k, v in obj.items()}
            n = len(next(iter(columns.values())))
            return [{k: v[i] for k, v in columns.items()} for i in range(n)]
        raise HarnessFileError([f"ERROR {path}: expected a list of records or an object of columns"])
    raise HarnessFileError([f"ERROR {path}: cannot read {suffix or 'a file without suffix'}; "
                            f"use .xlsx, .tsv, .csv or .json"])


def read_vlmevalkit(path: str | Path) -> list[HarnessAnswer]:
    """Answers of a VLMEvalKit prediction file (a ``prediction`` column per row)."""
    path = Path(path)
    rows = _table_rows(path)
    if rows and "prediction" not in rows[0]:
        raise HarnessFileError([f"ERROR {path}: no `prediction` column (columns: {', '.join(map(str, rows[0]))})"])
    out = []
    for i, row in enumerate(rows, 2):  # line 1 is the header
        index = row.get("index")
        try:
            index = int(float(index)) if index not in (None, "") else None
        except (TypeError, ValueError):
            index = None
        out.append(HarnessAnswer(where=f"{path}:row {i}", raw=_text(row.get("prediction")), key=_key(row.get("key")),
                                 index=index, view_order=_view_order(row.get("view_order"))))
    return out


READERS = {"lmms-eval": read_lmms_eval, "vlmevalkit": read_vlmevalkit}
