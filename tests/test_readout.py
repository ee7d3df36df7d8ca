"""The tower's semantic readout: targets from the 3-D truth, the fit learns them, the saved
readout loads strictly into the backbone and appends its probabilities to the patch tokens."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from common.config import load_config
from bench.synth.config import SynthConfig
from bench.synth.generate import build_scene
from bench.synth.semantic_grid import LAYOUT, OFFSET, WIDTH, block_targets, view_features
from model.readout import SemanticReadout
from pretrain.fit_readout import (READOUT_TAGS, ReadoutConfig, ReadoutCorpusConfig, build_corpus, fit,
                                  readout_figures, readout_loss)
from pretrain.corpus import SPATIAL_TAG, TEMPORAL_TAG

ROOT = Path(__file__).resolve().parents[1]


def test_block_targets_invert_the_one_hot_cells():
    cfg = load_config(SynthConfig, ROOT / "configs/bench/default.yaml", ["render.width=64", "render.height=64"])
    scene, renders, obs, _ = build_scene(cfg, 1)
    view = next(iter(renders))
    cells = view_features(scene, renders[view], obs[view], 0.0, 10)
    targets = block_targets(cells)
    assert targets.shape == (100, len(LAYOUT))
    for b, (name, width) in enumerate(LAYOUT):
        block = cells[:, OFFSET[name]:OFFSET[name] + width]
        for cell in range(100):
            if width == 1:
                assert targets[cell, b] == block[cell, 0]
            elif block[cell].any():
                assert block[cell, targets[cell, b]] == 1
            else:
                assert targets[cell, b] == width  # "not shown"
    # a person's attributes are shown exactly where the person flag is set
    person = targets[:, LAYOUT.index(("person", 1))] == 1
    shirt_width = dict(LAYOUT)["shirt"]
    assert ((targets[:, 1] < shirt_width) <= person).all()


def test_readout_probabilities_follow_the_layout():
    torch.manual_seed(0)
    model = SemanticReadout(24, LAYOUT, depth=1, heads=2, grid_cells=16, width=16)
    out = model(torch.randn(3, 16, 24))
    assert out.shape == (3, 16, WIDTH) and model.out_dim == WIDTH
    for name, width in LAYOUT:
        block = out[..., OFFSET[name]:OFFSET[name] + width]
        assert (block >= 0).all() and (block <= 1).all()
        if width > 1:  # a class block sums to the chance it is shown, below 1
            assert (block.sum(-1) < 1).all()


def _toy_data(n: int = 96, cells: int = 16, dim: int = 96, seed: int = 0):
    """Tokens whose first coordinates encode every block's class: a readout must recover them."""
    gen = torch.Generator().manual_seed(seed)
    targets = torch.stack([torch.randint(0, w + (w > 1), (n, cells), generator=gen) for _, w in LAYOUT], -1)
    codes = torch.randn(len(LAYOUT), 32, dim, generator=gen)
    tokens = sum(codes[b][targets[..., b]] for b in range(len(LAYOUT))) + 0.05 * torch.randn(n, cells, dim, generator=gen)
    return tokens.to(torch.float16), targets.to(torch.int8)


def test_fit_learns_separable_targets_and_reports_per_block():
    tokens, targets = _toy_data()
    cfg = ReadoutConfig(depth=1, width=32, heads=2, epochs=60, batch_size=16, lr=1e-2)
    untrained = SemanticReadout(tokens.shape[-1], LAYOUT, depth=1, heads=2, grid_cells=16, width=32)
    before = readout_loss(untrained.logits(tokens.float()), targets.long()).item()
    model, curve = fit(cfg, tokens, targets, progress=False)
    assert curve[-1] < 0.3 * before
    figures = readout_figures(model, tokens, targets)
    assert set(figures) == {name for name, _ in LAYOUT} | {"count_per_image"}
    assert figures["shirt"]["acc"] > 80 and figures["person"]["acc"] > 80


def test_corpus_is_seeded_and_apart_from_every_other_stream(tmp_path):
    assert not set(READOUT_TAGS) & {SPATIAL_TAG, TEMPORAL_TAG, 2, 4}
    cfg = ReadoutCorpusConfig(bench_config=str(ROOT / "configs/bench/default.yaml"), n_spatial=2, n_temporal=1,
                              frames_per_view=1, workers=1)
    a = build_corpus(cfg, 32, tmp_path / "a.pt", progress=False)
    b = build_corpus(cfg, 32, tmp_path / "b.pt", progress=False)
    assert torch.equal(a["images"], b["images"]) and torch.equal(a["targets"], b["targets"])
    assert a["images"].shape[1:] == (32, 32, 3) and a["targets"].shape[1:] == (100, len(LAYOUT))
    assert a["scene"].unique().tolist() == [0, 1, 2]
    assert not list(tmp_path.glob("*.tmp-*"))
    # the count block is the same on every cell of a view and matches its person flags' owners
    counts = a["targets"][..., -1].long()
    assert (counts == counts[:, :1]).all()
    np.testing.assert_array_less(-1, counts.numpy())
