"""augment.shuffle_options: the training split shows each sample's options in a new order each
epoch, the answer follows its option, a "none of the above" option stays last, and the default
(off) and evaluation items are exactly the stored order."""
from __future__ import annotations

import torch

from bench.format import load_benchmark
from inputs.features import FeatureTable
from inputs.text import PromptTokenizer
from bench.tiny import make_tiny_benchmark
from training.config import AugmentConfig
from training.data import ViewSetDataset


def _table(bench) -> FeatureTable:
    paths = sorted({str((bench.root / f.image).resolve()) for s in bench.samples for v in s.views for f in v.frames})
    return FeatureTable(patch_tokens=torch.zeros(len(paths), 4, 8, dtype=torch.float16),
                        pooled=torch.zeros(len(paths), 8, dtype=torch.float16),
                        index={p: i for i, p in enumerate(paths)}, sizes={p: (32, 32) for p in paths})


def _shown(tok, item) -> list[str]:
    """The option texts an item scores, decoded back to words (the CLIP tokenizer)."""
    return [tok.tokenizer.decode(ids.tolist()).strip() for ids in item["option_ids"]]


def test_options_move_the_answer_follows_and_nota_stays_last(tmp_path):
    bench = load_benchmark(make_tiny_benchmark(tmp_path / "b", n_scenes=6))
    tok, table = PromptTokenizer(), _table(bench)
    plain = ViewSetDataset(bench, table, tok, augment=AugmentConfig(), seed=3)
    shuffled = ViewSetDataset(bench, table, tok, augment=AugmentConfig(shuffle_options=True), seed=3)
    moved = nota = 0
    for epoch in range(3):
        plain.set_epoch(epoch)
        shuffled.set_epoch(epoch)
        for i, sample in enumerate(bench.samples):
            a, b = plain[i], shuffled[i]
            order = shuffled.option_order(i)
            assert sorted(order) == list(range(len(sample.options)))
            assert _shown(tok, b) == [_shown(tok, a)[j] for j in order]
            assert _shown(tok, b)[int(b["answer"])] == _shown(tok, a)[int(a["answer"])]
            assert int(a["answer"]) == sample.answer_index
            if sample.has_nota:
                assert order[-1] == len(sample.options) - 1 and _shown(tok, b)[-1] == "none of the above"
                nota += 1
            moved += order != sorted(order)
            # the view draw does not depend on the option order
            assert torch.equal(a["rows"], b["rows"]) and torch.equal(a["mark_boxes"], b["mark_boxes"])
    assert nota and moved > len(bench.samples)  # most samples get a new order, and it changes by epoch
    shuffled.set_epoch(0)
    first = [shuffled.option_order(i) for i in range(len(bench.samples))]
    shuffled.set_epoch(1)
    assert first != [shuffled.option_order(i) for i in range(len(bench.samples))]
    shuffled.set_epoch(0)
    assert first == [shuffled.option_order(i) for i in range(len(bench.samples))]  # a function of the epoch


def test_evaluation_items_keep_the_stored_order(tmp_path):
    from inputs.items import ViewSet
    bench = load_benchmark(make_tiny_benchmark(tmp_path / "b", n_scenes=2))
    sets = [ViewSet(i, tuple(s.gt_views), "+0", True) for i, s in enumerate(bench.samples)]
    data = ViewSetDataset(bench, _table(bench), PromptTokenizer(), view_sets=sets,
                          augment=AugmentConfig(shuffle_options=True))
    assert all(data.option_order(i) is None for i in range(len(sets)))
    assert [int(data[i]["answer"]) for i in range(len(sets))] == [s.answer_index for s in bench.samples]
