"""Dense training questions (``train_questions: dense``): more train questions from the same scenes
and images, each verified and balanced like the others, val and test byte for byte the same; and
the defaults keep the benchmark the default config made before the option existed."""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from common.config import load_config, to_dict
from bench.constants import NOTA
from bench.synth.balance import value_key
from bench.synth.check import check
from bench.synth.config import SynthConfig
from bench.synth.generate import generate, recorded_config
from bench.synth.question_counts import format_counts, question_counts

TINY = ["n_scenes=12", "temporal.n_scenes=2", "render.width=64", "render.height=64", "workers=1",
        "tasks.per_scene=2", "temporal.per_scene=2"]
NEW_KEYS = ("train_questions", "question_template")


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _samples(root: Path, split: str) -> list[dict]:
    f = root / split / "benchmark.json"
    return json.loads(f.read_text())["samples"] if f.exists() else []


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny benchmark sampled and dense (the same config otherwise)."""
    root = tmp_path_factory.mktemp("dense")
    for mode in ("sampled", "dense"):
        generate(load_config(SynthConfig, None, TINY + [f"train_questions={mode}"]), root / mode, progress=False)
    return root / "sampled", root / "dense"


def test_dense_grows_train_and_keeps_val_and_test_bytes(pair):
    sampled, dense = pair
    for part in ("val", "test"):
        assert _digest(dense / part) == _digest(sampled / part), part
        assert (dense / "labels" / f"{part}.jsonl.gz").read_bytes() == \
               (sampled / "labels" / f"{part}.jsonl.gz").read_bytes()
    assert len(_samples(dense, "train")) > len(_samples(sampled, "train"))
    # the extra questions reuse the scenes' renders (and marks drawn on them): an image both hold is the same
    both = _digest(dense / "train" / "images").items() & _digest(sampled / "train" / "images").items()
    assert both and {k for k, _ in both} == set(_digest(dense / "train" / "images")) & set(
        _digest(sampled / "train" / "images"))
    doc = json.loads((dense / "train" / "benchmark.json").read_text())
    assert doc["config"]["train_questions"] == "dense"
    assert "train_questions" not in json.loads((dense / "test" / "benchmark.json").read_text())["config"]


def test_dense_questions_pass_the_same_verification(pair):
    report = check(pair[1])
    assert report["valid"] and report["svi_rate"] == 1.0 and report["cvr_rate"] == 1.0
    assert report["svs_golden_rate"] == 1.0


def test_dense_train_stays_balanced(pair):
    """The selection's bounds hold on the dense train split: letters dealt evenly per task, single-view
    oracle hits within chance per MVN task, answer values flat over the common ones."""
    cfg = load_config(SynthConfig, None, TINY)
    train = _samples(pair[1], "train")
    for task in sorted({s["task"] for s in train}):
        ss = [s for s in train if s["task"] == task]
        letters = Counter(s["answer"] for s in ss)
        assert max(letters.values()) - min(letters.get(x, 0) for x in "ABCD") <= 1, (task, letters)
        if ss[0]["subset"] == "MVN":
            hits = sum(s["meta"]["verification"]["oracle_correct"] for s in ss)
            assert hits <= math.ceil(0.25 * len(ss)), (task, hits, len(ss))
        if task in ("limb_contact", "motion_recognition"):
            continue  # flattened over a key the sample does not store (object kind | part, number of actions)
        answers = [s["options"][ord(s["answer"]) - ord("A")] for s in ss]
        values = Counter(value_key({"task": task, "value_key": None, "answer_value": a}) for a in answers if a != NOTA)
        common = [c for c in values.values() if c >= cfg.tasks.major_value_share * sum(values.values())]
        assert max(values.values()) <= math.ceil(cfg.tasks.value_cap * min(common)) + 1, (task, values)


def test_question_counts_per_scene(pair):
    sampled, dense = (question_counts(root) for root in pair)
    assert sampled["scenes"] == dense["scenes"] and sampled["scenes"]["spatial"] > 0
    assert dense["questions"] > sampled["questions"]
    n = sampled["scenes"]["spatial"]
    row = sampled["by_task"]["limb_occlusion"]
    assert row["per_scene"] == round(row["questions"] / n, 3)
    assert "limb_occlusion" in format_counts({"sampled": sampled, "dense": dense})


def test_defaults_record_the_config_as_before():
    """At the defaults the recorded config is the one written before these keys existed: the default
    benchmark keeps its bytes (tmp check: configs/bench/default.yaml at n_scenes=10, temporal.n_scenes=3
    generated byte-identical before and after)."""
    cfg = load_config(SynthConfig, "configs/bench/default.yaml")
    assert (cfg.train_questions, cfg.question_template) == ("sampled", "primary")
    before = {k: v for k, v in to_dict(cfg).items() if k not in NEW_KEYS}
    for split in ("train", "val", "test"):
        assert recorded_config(cfg, split) == before
    dense = load_config(SynthConfig, "configs/bench/dense.yaml")
    assert recorded_config(dense, "train")["train_questions"] == "dense"
    assert recorded_config(dense, "test") == dict(before, name=dense.name)
    diff = {k for k, v in to_dict(dense).items() if to_dict(cfg)[k] != v}
    assert diff == {"name", "train_questions"}


def test_train_questions_is_checked():
    from common.config import ConfigError
    with pytest.raises(ConfigError, match="train_questions"):
        load_config(SynthConfig, None, ["train_questions=all"])
