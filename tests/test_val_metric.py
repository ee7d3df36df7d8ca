"""best.ckpt is chosen on the evaluator's own accuracy: the validation metric of
training/module.py scores (sample, setting) units exactly as eval/metrics.py does."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from bench.constants import NO_SUBSET
from bench.format import Frame, Sample, View
from bench.protocol import ProtocolConfig, accuracy_by_setting, primary_setting, unit_scores
from eval.metrics import accuracy_summary, score_units
from training.datamodule import protocol_view_sets
from training.module import validation_accuracy

SETTINGS = ["+0", "+2", "-1"]


def _samples(n: int = 12) -> list[Sample]:
    """MVN samples with 2 or 3 gt views (so -1 has 2 or 3 variants), SVS samples, one no-subset."""
    out = []
    for i in range(n):
        views = [View(f"v{j}", [Frame(0.0, f"s{i}/v{j}.png")]) for j in range(5)]
        if i % 3 == 2:
            subset, gt = "SVS", ["v0"]
        else:
            subset, gt = "MVN", ["v0", "v1", "v2"][: 2 + i % 3]
        out.append(Sample(id=f"q{i:02d}", task=f"t{i % 2}", question="?", options=["a", "b", "c", "d"], answer="A",
                          views=views, gt_views=gt, extra_views=[v.view_id for v in views if v.view_id not in gt],
                          subset=subset, scene=f"s{i // 2}"))
    out.append(Sample(id="z", task="t0", question="?", options=["a", "b"], answer="B", views=views[:2],
                      gt_views=["v0", "v1"], scene="sz"))
    return out


def _records(samples, view_sets, right) -> list[dict]:
    """The evaluator's prediction lines for the same answers (fields score_units reads)."""
    return [{"sample_id": samples[vs.sample_index].id, "setting": vs.setting, "variant": vs.variant, "correct": ok,
             "cluster": samples[vs.sample_index].cluster, "subset": samples[vs.sample_index].subset or NO_SUBSET,
             "task": samples[vs.sample_index].task, "n_options": len(samples[vs.sample_index].options),
             "primary": vs.setting == primary_setting(samples[vs.sample_index])}
            for vs, ok in zip(view_sets, right)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_validation_accuracy_is_the_evaluators_accuracy(seed):
    samples = _samples()
    bench = SimpleNamespace(samples=samples)
    view_sets = protocol_view_sets(bench, SETTINGS, seed=0)
    assert {vs.variant for vs in view_sets if vs.setting == "-1"} >= {"drop=v0", "drop=v1", "drop=v2"}
    rng = random.Random(seed)
    right = [rng.random() < 0.5 for _ in view_sets]
    val = validation_accuracy(view_sets, samples, right, [1] * len(view_sets), SETTINGS)
    acc = accuracy_summary(score_units(_records(samples, view_sets, right)), ProtocolConfig().max_extra,
                           n_boot=10, seed=0)["acc"]
    for setting in SETTINGS:
        assert val[f"val/acc_{setting}"] == pytest.approx(acc[setting]["overall"], abs=0.005)  # eval rounds to 0.01
    assert val["val/acc"] == pytest.approx(sum(val[f"val/acc_{s}"] for s in SETTINGS) / 3)


def test_minus_one_counts_each_sample_once_not_each_dropped_view():
    """The change: the old metric pooled -1 view sets, so a sample with 3 droppable views weighed
    3/2 of one with 2. Now each sample's variants are averaged first, as the evaluator does."""
    lines = [("two", "-1", "drop=a", True), ("two", "-1", "drop=b", True),
             ("three", "-1", "drop=a", False), ("three", "-1", "drop=b", False), ("three", "-1", "drop=c", False)]
    assert accuracy_by_setting(unit_scores(lines)) == {"-1": 50.0}  # (1 + 0) / 2 samples
    old = 100.0 * sum(ok for *_, ok in lines) / len(lines)
    assert old == 40.0  # 2 of 5 view sets


def test_variants_are_averaged_and_rotations_must_all_be_right():
    lines = [("s", "-1", "drop=a", True), ("s", "-1", "drop=b", False),
             ("s", "+0", "", True), ("s", "+0", "", False),  # two rotations: one wrong, so the unit is wrong
             ("t", "+0", "", True)]
    assert unit_scores(lines) == {("s", "-1"): 0.5, ("s", "+0"): 0.0, ("t", "+0"): 1.0}


class _ValSet:
    def __init__(self, samples, view_sets):
        self.bench, self.view_sets = SimpleNamespace(samples=samples), view_sets

    def __len__(self) -> int:
        return len(self.view_sets)


def test_the_validation_hook_logs_the_shared_metric():
    """on_validation_epoch_end: per-view-set flags (reduced over ranks) -> validation_accuracy."""
    from common.config import to_dict
    from training.config import TrainConfig
    from training.module import EntityModule
    cfg = TrainConfig()
    cfg.perception.entities = "truth"  # no perception heads needed to build the module
    cfg.model.width, cfg.model.heads = 16, 2
    cfg.eval.val_settings = SETTINGS
    module = EntityModule(to_dict(cfg), vocab=["<pad>", "<unk>", "<cls>"] + [str(k) for k in range(17)])
    samples = _samples()
    view_sets = protocol_view_sets(SimpleNamespace(samples=samples), SETTINGS, seed=0)
    reduced = []

    def reduce(tensor, reduce_op):
        reduced.append(reduce_op)
        return tensor
    module._trainer = SimpleNamespace(datamodule=SimpleNamespace(val_set=_ValSet(samples, view_sets)),
                                      strategy=SimpleNamespace(reduce=reduce))
    logged = {}
    module.log = lambda name, value, **kwargs: logged.__setitem__(name, value)
    right = [i % 3 == 0 for i in range(len(view_sets))]
    module._val = {i: ok for i, ok in enumerate(right) if i % 4}  # a share: some view sets on another rank
    module.on_validation_epoch_end()
    scored = [1 if i % 4 else 0 for i in range(len(view_sets))]
    assert reduced == ["sum"] and module._val == {}
    assert logged == validation_accuracy(view_sets, samples, right, scored, SETTINGS)
    assert set(logged) == {"val/acc", *(f"val/acc_{s}" for s in SETTINGS)}
