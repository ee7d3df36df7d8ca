"""The mark facts: the generator's per-mark record (meta "mark_facts"), its targets
(inputs/mark_facts.py), the model's mark-fact head (model.entity.fact_head) and its loss
(loss.mark_facts)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from common.config import load_config
from bench.format import load_benchmark
from bench.entities import IGNORE as NOT_SHOWN
from bench.entities import MARK_FACT_KEYS
from bench.synth.config import SynthConfig
from bench.synth.generate import generate
from inputs.mark_facts import FACTS, fact_sizes, fact_words, mark_fact_table
from inputs.text import PromptTokenizer
from inputs.track import IGNORE
from model.build import build_model
from model.config import MARK_FACT_SIZES, MARK_FACT_TOKEN_IDS, EntityConfig, tiny_model_config
from model.dummy_batch import random_batch, with_answer_labels
from training.config import LossConfig
from training.losses import CrossViewCriterion

TINY = ["n_scenes=6", "render.width=64", "render.height=64", "workers=1", "tasks.per_scene=2",
        "temporal.n_scenes=0"]


@pytest.fixture(scope="module")
def tiny_bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("facts") / "bench"
    generate(load_config(SynthConfig, None, TINY), out, progress=False)
    return [s for split in ("train", "val", "test") if (out / split / "benchmark.json").exists()
            for s in load_benchmark(out / split).samples]


def test_the_generator_records_each_marks_facts(tiny_bench):
    marked = [s for s in tiny_bench if s.marks]
    assert marked
    persons = 0
    for s in marked:
        record = s.meta["mark_facts"]
        assert len(record) == len(s.marks)
        for mark, facts in zip(s.marks, record):
            if facts is None:
                continue
            persons += 1
            assert set(facts) == set(MARK_FACT_KEYS)
            for (name, classes) in FACTS:
                assert facts[name] == NOT_SHOWN or 0 <= facts[name] < len(classes), (s.id, name)
        table = mark_fact_table(s.meta, len(s.marks))
        assert table.shape == (len(s.marks), len(FACTS))
        for row, facts in zip(table.tolist(), record):  # what the view does not show is ignored
            assert row == [IGNORE if facts is None or facts[n] == NOT_SHOWN else facts[n] for n, _ in FACTS]
    assert persons > 0
    assert all("mark_facts" not in s.meta for s in tiny_bench if not s.marks)


def test_targets_without_a_record_are_ignored_and_a_wrong_length_is_an_error():
    assert (mark_fact_table({}, 3) == IGNORE).all() and mark_fact_table(None, 0).shape == (0, len(FACTS))
    with pytest.raises(ValueError, match="lists 1 marks, the sample has 2"):
        mark_fact_table({"mark_facts": [None]}, 2)
    row = mark_fact_table({"mark_facts": [{"shirt": 3, "arm_l": NOT_SHOWN}]}, 1)[0].tolist()
    assert row[0] == 3 and row[1:] == [IGNORE] * (len(FACTS) - 1)


def test_the_configs_token_ids_are_the_tokenizers():
    tok = PromptTokenizer()
    assert [tok.ids(w, continuation=True) for w in fact_words()] == [list(x) for x in MARK_FACT_TOKEN_IDS]
    assert fact_sizes() == MARK_FACT_SIZES == EntityConfig().fact_sizes


def _tiny_fact_model(token_ids=True):
    cfg = tiny_model_config()
    sizes = [3, 2]
    ids = [[1], [2, 3], [4], [5], [6, 7]] if token_ids else None
    cfg = dataclasses.replace(cfg, entity=dataclasses.replace(cfg.entity, fact_head=True, fact_sizes=sizes,
                                                               fact_token_ids=ids))
    torch.manual_seed(0)
    return build_model(cfg), sizes


@pytest.mark.parametrize("token_ids", [True, False])
def test_the_head_scores_every_mark_and_the_loss_trains_the_words(token_ids):
    model, sizes = _tiny_fact_model(token_ids)
    batch = with_answer_labels(random_batch(model.cfg, views=[2, 3], frames=[1, 1], options=[4, 4], marks=2))
    out = model(batch)
    logits = out["mark_fact_logits"]
    assert logits.shape == (*batch["mark_mask"].shape, sum(sizes))
    assert out["mark_fact_of_class"].tolist() == [0, 0, 0, 1, 1]
    target = torch.full((*batch["mark_mask"].shape, len(sizes)), IGNORE, dtype=torch.long)
    first = batch["mark_mask"].nonzero()[0].tolist()
    target[tuple(first)] = torch.tensor([2, 1])
    batch["mark_facts"] = target
    crit = CrossViewCriterion(LossConfig())
    terms = crit(out, batch)
    expected = (torch.nn.functional.cross_entropy(logits[tuple(first)][:3][None], torch.tensor([2]))
                + torch.nn.functional.cross_entropy(logits[tuple(first)][3:][None], torch.tensor([1]))) / 2
    assert torch.allclose(terms["loss_mark_facts"], expected)
    right, total = crit.mark_fact_hits(out, batch)
    row = logits[tuple(first)]
    assert total == 2 and right == int(row[:3].argmax() == 2) + int(row[3:].argmax() == 1)
    model.zero_grad()
    terms["loss_mark_facts"].backward()
    if token_ids:  # the class words' embeddings learn from the facts (the rest from the prompt)
        assert model.language_head.lm.get_input_embeddings().weight.grad[1:8].abs().sum(1).min() > 0
        model.zero_grad()
        model.fact_head(torch.randn(4, model.cfg.d_model), model.fact_classes()).sum().backward()
        grad = model.language_head.lm.get_input_embeddings().weight.grad
        assert grad[1:8].abs().sum(1).min() > 0 and grad[8:].abs().sum() == 0 and grad[0].abs().sum() == 0
    else:
        assert model.fact_vectors.grad.abs().sum() > 0
    batch["mark_facts"] = torch.full_like(target, IGNORE)  # no record: the term is 0, not NaN
    assert crit(model(batch), batch)["loss_mark_facts"].item() == 0.0


def test_without_the_head_nothing_changes():
    cfg = tiny_model_config()
    torch.manual_seed(0)
    plain = build_model(cfg)
    assert plain.fact_head is None and "mark_fact_logits" not in plain(
        random_batch(cfg, views=[2], frames=[1], options=[4]))
    with_head, _ = _tiny_fact_model()
    extra = set(with_head.state_dict()) - set(plain.state_dict())
    assert extra and all(k.startswith("fact_head.") for k in extra)


def test_wrong_token_ids_are_refused():
    cfg = tiny_model_config()
    bad = dataclasses.replace(cfg, entity=dataclasses.replace(cfg.entity, fact_head=True, fact_sizes=[2],
                                                               fact_token_ids=[[1], [2], [3]]))
    with pytest.raises(ValueError, match="3 classes"):
        build_model(bad)


def test_training_the_head_on_a_benchmark_without_records_is_refused(tmp_path):
    from bench.tiny import make_tiny_benchmark
    from training.config import load_train_config
    from training.datamodule import check_mark_facts
    bench = load_benchmark(make_tiny_benchmark(tmp_path / "b", n_scenes=2))
    assert any(s.marks for s in bench.samples)
    check_mark_facts(load_train_config(None, []), bench)  # head off: nothing to check
    on = load_train_config(None, ["model.entity.fact_head=true"])
    with pytest.raises(ValueError, match="no marked sample of the split has meta.mark_facts"):
        check_mark_facts(on, bench)
    check_mark_facts(load_train_config(None, ["model.entity.fact_head=true", "loss.mark_facts=0"]), bench)
    for s in bench.samples:
        if s.marks:
            s.meta["mark_facts"] = [None] * len(s.marks)
    check_mark_facts(on, bench)


@pytest.mark.slow
def test_a_run_with_the_head_trains_logs_and_scores_through_the_evaluator(tmp_path):
    """End to end on a tiny benchmark whose marks carry (made-up) records: the loss term and the
    val metric are logged, and the checkpoint (with the head) scores through the crossview adapter."""
    import csv
    import json

    from test_train_e2e import tiny_config
    from bench.tiny import make_tiny_benchmark
    from training.run import train
    root = tmp_path / "bench"
    for split in ("train", "val", "test"):
        folder = make_tiny_benchmark(root / split, n_scenes=4 if split == "train" else 2)
        doc_path = folder / "benchmark.json"
        doc = json.loads(doc_path.read_text())
        samples = doc["samples"] if isinstance(doc, dict) else doc
        for i, s in enumerate(samples):
            if s.get("marks"):
                s.setdefault("meta", {})["mark_facts"] = [
                    {name: (i + k) % len(classes) for name, classes in FACTS} for k in range(len(s["marks"]))]
        doc_path.write_text(json.dumps(doc))
    cfg = tiny_config(root, tmp_path)
    cfg.model.entity.fact_head = True
    metrics = train(cfg)
    run = tmp_path / "runs" / "tiny"
    rows = list(csv.DictReader(open(run / "logs" / "metrics.csv")))
    assert any(r.get("train/loss_mark_facts_epoch") for r in rows)
    assert any(r.get("val/mark_fact_acc") for r in rows)
    from eval.runner import evaluate
    summary = evaluate(root / "test", "crossview", tmp_path / "ev",
                       model_args={"ckpt": str(run / "best.ckpt"), "cache_dir": cfg.data.cache_dir},
                       settings=["+0"], progress=False, plots=False)
    assert summary["acc"]["+0"]["SVS"] == pytest.approx(metrics["acc"]["+0"]["SVS"])


def test_a_vector_shared_by_a_facts_classes_does_not_change_its_scores():
    """Freshly projected words share token_proj's bias; the head scores what tells a fact's
    classes apart, so a shared shift moves no logit, and even nearly identical class vectors
    (cosine 0.96, as at init) are scored far apart."""
    from model.fact_head import MarkFactHead
    torch.manual_seed(0)
    head = MarkFactHead(16, [3, 2])
    tokens, classes = torch.randn(5, 16), torch.randn(5, 16) * 0.1
    shift = torch.zeros(5, 16)
    shift[:3], shift[3:] = torch.randn(16), torch.randn(16)  # one vector per fact
    before, after = head(tokens, classes), head(tokens, classes + 5.0 * shift)
    assert torch.allclose(before, after, atol=1e-5)
    centred = head.centred(classes)
    assert torch.allclose(centred[:3].sum(0), torch.zeros(16), atol=1e-6)
    assert torch.allclose(centred[3:].sum(0), torch.zeros(16), atol=1e-6)
    # a spread of several logits within a fact at init, not the few tenths of a scaled dot product
    assert (before[:, :3].max(-1).values - before[:, :3].min(-1).values).mean() > 2.0
