"""Paraphrased questions (``question_template: paraphrase``, configs/bench/paraphrase.yaml): a second
wording per task, test-only, with everything but the question text as the primary wording makes it;
the primary configs never show it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from common.config import ConfigError, load_config
from bench.synth.check import check
from bench.synth.config import SynthConfig
from bench.synth.generate import generate
from bench.synth.tasks import TASKS
from bench.synth.wording import PARAPHRASES, PRIMARY, phrase, slots

ROOT = Path(__file__).resolve().parents[1]
TEST_ONLY = ["n_scenes=8", "temporal.n_scenes=2", "render.width=64", "render.height=64", "workers=1",
             "split_fractions=[0,0,1]", "seed=1004"]
_WORD = re.compile(r"[a-z]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(re.sub(r"\{\w+\}", " ", text.lower()))


def test_every_task_has_a_second_wording_with_the_same_slots():
    assert set(PRIMARY) == set(PARAPHRASES) == set(TASKS)
    for task, first in PRIMARY.items():
        second = PARAPHRASES[task]
        assert sorted(re.findall(r"\{(\w+)\}", first)) == sorted(re.findall(r"\{(\w+)\}", second)), task
        assert _words(first) != _words(second), task
        assert set(_words(second)) - set(_words(first)), task  # other words, not only another order
        for word in ("cam", "view"):  # never names a view: the evaluator shuffles them
            assert word not in second.lower(), task
        assert ("1" in first) == ("1" in second), task  # a mark label stays a word of the question


def test_phrase_reads_the_slots_back():
    q = "How many times does the person in the light blue shirt wave their left hand?"
    assert slots("limb_repetition_count", q) == {"shirt": "light blue", "side": "left"}
    assert phrase("limb_repetition_count", q, "paraphrase") == \
        "The person wearing the light blue shirt waves their left hand how many times?"
    assert phrase("limb_repetition_count", q, "primary") == q
    with pytest.raises(ValueError, match="primary template"):
        slots("dedup_count", "How many people?")


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """The same tiny test-only benchmark worded both ways."""
    root = tmp_path_factory.mktemp("para")
    for template in ("primary", "paraphrase"):
        generate(load_config(SynthConfig, None, TEST_ONLY + [f"question_template={template}"]), root / template,
                 progress=False)
    return root / "primary", root / "paraphrase"


def _test_doc(root: Path) -> dict:
    return json.loads((root / "test" / "benchmark.json").read_text())


def test_paraphrase_changes_the_question_text_alone(pair):
    first, second = (_test_doc(root) for root in pair)
    assert not (pair[1] / "train").exists() and not (pair[1] / "val").exists()
    assert len(first["samples"]) == len(second["samples"]) > 0
    tasks = set()
    for a, b in zip(first["samples"], second["samples"]):
        assert {k: v for k, v in a.items() if k != "question"} == {k: v for k, v in b.items() if k != "question"}
        assert b["question"] == phrase(a["task"], a["question"], "paraphrase") != a["question"]
        tasks.add(a["task"])
    assert len(tasks) >= 8  # most tasks occur in the tiny split
    assert second["config"]["question_template"] == "paraphrase"
    assert "question_template" not in first["config"]


def test_paraphrased_split_passes_the_check(pair):
    report = check(pair[1])
    assert report["valid"] and report["svi_rate"] == 1.0 and report["cvr_rate"] == 1.0


def test_primary_configs_never_use_the_paraphrase(pair):
    """Primary-worded questions all read back through their primary template, and a config that has
    train or val scenes cannot switch to the paraphrase."""
    for s in _test_doc(pair[0])["samples"]:
        slots(s["task"], s["question"])
    for bad in (["question_template=paraphrase"], TEST_ONLY + ["question_template=paraphrase", "extra_train_scenes=2"]):
        with pytest.raises(ConfigError, match="test-only"):
            load_config(SynthConfig, None, bad)
    with pytest.raises(ConfigError, match="question_template"):
        load_config(SynthConfig, None, ["question_template=second"])


def test_paraphrase_config_is_test_only_with_a_seed_of_its_own():
    cfg = load_config(SynthConfig, "configs/bench/paraphrase.yaml")
    assert cfg.question_template == "paraphrase" and cfg.split_fractions == [0.0, 0.0, 1.0]
    others = [load_config(SynthConfig, p) for p in sorted(Path("configs/bench").glob("*.yaml"))
              if p.name != "paraphrase.yaml"]
    assert cfg.seed not in {o.seed for o in others}
    assert all(o.question_template == "primary" for o in others)
