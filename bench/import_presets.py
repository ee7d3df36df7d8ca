"""Column maps of public multi-image benchmarks for ``python -m bench import hf --preset NAME``.

Each preset names, for every field of a sample, the source column(s) to read, first present
wins; ``--map field=column`` overrides one. The column layouts come from the dataset cards:

- ``blink`` (BLINK-Benchmark/BLINK, one config per sub-task, splits val/test): ``idx``,
  ``sub_task``, ``question``, ``choices`` (list), ``answer`` ("(A)"), ``image_1`` .. ``image_4``
  (HF images, unused ones null), ``prompt`` and ``explanation`` kept in meta.
- ``mmsi`` (RunsenXu/MMSI-Bench, MMSI_Bench.parquet): ``id``, ``images`` (list of image
  bytes), ``question_type``, ``question`` with the options written into it ("... Options:
  A: ..., B: ..."), ``answer`` (a letter), ``thought``, ``difficulty`` and
  ``mean_normed_duration_seconds`` kept in meta.
- ``all-angles`` (ch-chenyu/All-Angles-Bench, data.json): ``index``, ``folder`` (the
  scene), ``category``, ``pair_idx``, ``image_path`` (list of paths relative to the file),
  ``question``, ``A`` .. ``C`` (``D``, ``E`` if present), ``answer`` (a letter),
  ``sourced_dataset``.
- ``generic``: ``id``, ``task``/``category``, ``question``, ``options``/``choices`` or
  ``A``..``E``, ``answer``, ``images``/``image``; a ``samples`` export of this project
  (``python -m bench export hf``) is recognised and restored losslessly.

None of these annotate V_GT: every image becomes one view, all of them in ``gt_views``, and
``subset`` stays null, so the evaluator asks them under the ``all`` setting and reports them
in the CVBench-style tables.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from common.config import KeyValueError, parse_key_value
from bench.constants import LETTERS

FIELDS = ("id", "task", "question", "options", "answer", "images", "scene", "subset", "axis", "granularity")
LETTER_COLUMNS = tuple(LETTERS[:8])  # option columns A..H


@dataclass(frozen=True)
class Preset:
    """Where each sample field comes from. A candidate "a,b,c" reads several columns at once
    (letter columns for ``options``, one column per image for ``images``)."""
    name: str
    columns: dict[str, tuple[str, ...]]  # field -> candidate columns, first present wins
    meta: tuple[str, ...] = ()  # source columns copied into sample.meta when present
    options_in_question: bool = False  # the options are written into the question text
    prefix: str = ""  # prefix of generated sample ids (when the id column is an integer index)


PRESETS: dict[str, Preset] = {
    "generic": Preset("generic", {
        "id": ("id", "idx", "index", "question_id"), "task": ("task", "category", "sub_task", "question_type"),
        "question": ("question",), "options": ("options", "choices", ",".join(LETTER_COLUMNS)),
        "answer": ("answer",), "images": ("images", "image", "image_path"),
        "scene": ("scene",), "subset": ("subset",), "axis": ("axis",), "granularity": ("granularity",)}),
    "blink": Preset("blink", {
        "id": ("idx",), "task": ("sub_task",), "question": ("question",), "options": ("choices",),
        "answer": ("answer",), "images": ("image_1,image_2,image_3,image_4",)},
        meta=("prompt", "explanation")),
    "mmsi": Preset("mmsi", {
        "id": ("id",), "task": ("question_type",), "question": ("question",), "answer": ("answer",),
        "images": ("images",)},
        meta=("thought", "difficulty", "mean_normed_duration_seconds"), options_in_question=True, prefix="mmsi-"),
    "all-angles": Preset("all-angles", {
        "id": ("index",), "task": ("category",), "scene": ("folder",), "question": ("question",),
        "options": (",".join(LETTER_COLUMNS),), "answer": ("answer",), "images": ("image_path",)},
        meta=("pair_idx", "sourced_dataset"), prefix="aab-"),
}


@dataclass
class ColumnMap:
    """The resolved columns of one import: preset candidates with ``--map`` overrides applied."""
    preset: Preset
    overrides: dict[str, str] = field(default_factory=dict)

    def candidates(self, name: str) -> tuple[str, ...]:
        if name in self.overrides:
            return (self.overrides[name],)
        return self.preset.columns.get(name, ())

    def resolve(self, name: str, columns: set[str]) -> list[str] | None:
        """The source column(s) of ``name`` present in ``columns``; None when none is."""
        for cand in self.candidates(name):
            parts = [c.strip() for c in cand.split(",") if c.strip()]
            present = [c for c in parts if c in columns]
            if present and (len(parts) > 1 or present == parts):
                return present
        return None


def parse_map(items: list[str]) -> tuple[dict[str, str], list[str]]:
    """``["task=category", "images=img_a,img_b"]`` -> {field: column(s)}; problems for bad items."""
    out, problems = {}, []
    for item in items or []:
        try:
            key, value = parse_key_value(item, parse_value=False)
        except KeyValueError:
            key, value = "", ""
        value = value.strip()
        if not key or not value:
            problems.append(f"ERROR --map {item!r}: expected field=column")
        elif key not in FIELDS:
            problems.append(f"ERROR --map {item!r}: unknown field {key!r}; one of {', '.join(FIELDS)}")
        else:
            out[key] = value
    return out, problems


_OPTIONS_MARKER = re.compile(r"\b(?:options|choices)\s*:", re.IGNORECASE)
# A label "A:", "A.", "A)" or "(A)" that starts the text or follows whitespace, a comma or a semicolon.
_LABEL = re.compile(r"(?:^|(?<=[\s,;]))\(?([A-Z])[\.:\)]\s*")


def split_question_options(text: str) -> tuple[str, list[str]] | None:
    """Split a question with written-in options ("Q? Options: A: x, B: y") into (question, options).

    Labels must run A, B, C, ... in order; None when fewer than two are found.
    """
    marker = _OPTIONS_MARKER.search(text)
    tail = text[marker.end():] if marker else text
    found, expected = [], 0
    for m in _LABEL.finditer(tail):
        if expected < len(LETTERS) and m.group(1) == LETTERS[expected]:
            found.append(m)
            expected += 1
    if len(found) < 2:
        return None
    head = text[:marker.start()] if marker else tail[:found[0].start()]
    ends = [m.start() for m in found[1:]] + [len(tail)]
    options = [tail[m.end():end].strip().rstrip(",;").strip() for m, end in zip(found, ends)]
    if not head.strip() or not all(options):
        return None
    return head.strip(), options


_LETTER_ANSWER = re.compile(r"^\s*\(?([A-Za-z])\)?\s*[\.:]?\s*$")


def answer_letter(value, options: list[str]) -> str | None:
    """The letter of an answer given as "B", "(B)", "b." or as the option's own text; None if unreadable."""
    if value is None:
        return None
    text = str(value).strip()
    m = _LETTER_ANSWER.match(text)
    if m and m.group(1).upper() in LETTERS[:len(options)]:
        return m.group(1).upper()
    for i, opt in enumerate(options):
        if text and text.lower() == str(opt).strip().lower():
            return LETTERS[i]
    return None
