"""The shipped in-domain CLIP tower: the committed file is the one its model card names, it loads
strictly through open_clip and gives the shapes the default config expects."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import torch

from bench.synth.captions import CaptionTokenizer
from eval.adapters import build_model
from model.backbone import build_backbone
from training.config import load_train_config

ROOT = Path(__file__).resolve().parents[1]
TOWER = ROOT / "checkpoints/backbone/synthclip-s16"


def test_weights_match_the_model_card_and_stay_small():
    weights = TOWER / "open_clip_model.safetensors"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    card = (TOWER / "MODEL_CARD.md").read_text()
    assert re.search(r"sha256 `([0-9a-f]{64})`", card).group(1) == digest
    shipped = ["open_clip_config.json", "open_clip_model.safetensors", "MODEL_CARD.md", "log.csv", "loss.png",
               "pretrain_figures.json"]  # what .gitignore lets into git (train_state.pt stays out)
    total = sum((TOWER / name).stat().st_size for name in shipped)
    assert total <= 25 * 2 ** 20


def test_default_config_loads_the_shipped_tower_frozen():
    cfg = load_train_config(ROOT / "configs/default.yaml", [])
    assert Path(cfg.model.backbone.pretrained).resolve() == TOWER.resolve()
    backbone = build_backbone(cfg.model.backbone)
    assert not any(p.requires_grad for p in backbone.parameters())
    out = backbone(torch.randn(2, 3, cfg.model.backbone.image_size, cfg.model.backbone.image_size))
    assert out["patch_tokens"].shape == (2, 100, cfg.model.patch_dim)
    assert out["pooled"].shape == (2, cfg.model.pooled_dim)
    assert backbone.identity.startswith("synthclip-s16-")


def test_text_tower_and_tokenizer_travel_with_the_weights():
    config = json.loads((TOWER / "open_clip_config.json").read_text())
    tok = CaptionTokenizer(config["tokenizer"]["vocab"], config["tokenizer"]["context_length"])
    assert tok.vocab_size == config["model_cfg"]["text_cfg"]["vocab_size"]
    adapter = build_model("clip-zeroshot", {"pretrained": str(TOWER)})
    assert adapter.pretrained
    with torch.no_grad():
        txt = adapter.model.encode_text(adapter.tokenizer(["2 people . person : red shirt"]), normalize=True)
    assert txt.shape == (1, config["model_cfg"]["embed_dim"])
    assert (ROOT / "configs/backbone/synthclip-s16.yaml").is_file()
