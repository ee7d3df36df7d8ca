"""The shipped in-domain CLIP towers (the default, synthclip-cnn16, and the ViT before it,
synthclip-s16): each committed file is the one its model card names, they load strictly through
open_clip, and the default gives the shapes the default config expects."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import torch

from bench.synth.captions import CaptionTokenizer
from eval.adapters import build_model
from inputs.backbone import build_backbone
from model.config import BackboneConfig

ROOT = Path(__file__).resolve().parents[1]
TOWER = ROOT / "checkpoints/backbone/synthclip-cnn16"
SHIPPED = ["synthclip-cnn16", "synthclip-s16"]  # the default and the ViT tower before it (configs/ablations/vit_backbone.yaml)
FILES = ["open_clip_config.json", "open_clip_model.safetensors", "MODEL_CARD.md", "log.csv", "loss.png",
         "pretrain_figures.json"]  # what .gitignore lets into git (train_state.pt stays out)


@pytest.mark.parametrize("name", SHIPPED)
def test_weights_match_the_model_card(name):
    tower = ROOT / "checkpoints/backbone" / name
    digest = hashlib.sha256((tower / "open_clip_model.safetensors").read_bytes()).hexdigest()
    card = (tower / "MODEL_CARD.md").read_text()
    assert re.search(r"sha256 `([0-9a-f]{64})`", card).group(1) == digest
    assert (ROOT / "configs/backbone" / f"{name}.yaml").is_file()


def test_shipped_weights_stay_small_in_all():
    total = sum((ROOT / "checkpoints/backbone" / name / f).stat().st_size for name in SHIPPED for f in FILES
                if (ROOT / "checkpoints/backbone" / name / f).is_file())
    assert total <= 25 * 2 ** 20


def test_default_config_loads_the_shipped_tower_frozen():
    cfg = BackboneConfig()
    assert Path(cfg.pretrained).resolve() == TOWER.resolve()
    backbone = build_backbone(cfg)
    assert not any(p.requires_grad for p in backbone.parameters())
    out = backbone(torch.randn(2, 3, cfg.image_size, cfg.image_size))
    assert out["patch_tokens"].shape == (2, 100, backbone.patch_dim)
    assert out["pooled"].shape == (2, backbone.pooled_dim)
    assert backbone.identity.startswith("synthclip-cnn16-") and backbone.grid_size == (10, 10)


@pytest.mark.parametrize("name", SHIPPED)
def test_text_tower_and_tokenizer_travel_with_the_weights(name):
    tower = ROOT / "checkpoints/backbone" / name
    config = json.loads((tower / "open_clip_config.json").read_text())
    tok = CaptionTokenizer(config["tokenizer"]["vocab"], config["tokenizer"]["context_length"])
    assert tok.vocab_size == config["model_cfg"]["text_cfg"]["vocab_size"]
    adapter = build_model("clip-zeroshot", {"pretrained": str(tower)})
    assert adapter.pretrained
    with torch.no_grad():
        txt = adapter.model.encode_text(adapter.tokenizer(["2 people . person : red shirt"]), normalize=True)
    assert txt.shape == (1, config["model_cfg"]["embed_dim"])


def test_each_tower_is_read_where_its_heads_were_trained():
    """The CNN's heads read its stride-16 stage, the ViT's its last block; a config that reads
    another level of a pretrained folder is warned about, and folder_config picks the right one."""
    from inputs.backbone import folder_config, locate_pretrained, trained_level
    assert trained_level(locate_pretrained(str(TOWER))) == 3
    assert trained_level(locate_pretrained("checkpoints/backbone/synthclip-s16")) == -1
    assert trained_level(None) is None
    vit = "checkpoints/backbone/synthclip-s16"
    with pytest.warns(UserWarning, match="patch_layer=-1"):
        build_backbone(BackboneConfig(arch="synthclip-s16", pretrained=vit, patch_layer=3))
    assert build_backbone(folder_config(vit)).grid_size == (10, 10)
    assert folder_config(vit).patch_layer == -1 and folder_config(str(TOWER)).patch_layer == 3


def test_the_shipped_perception_heads_match_their_card_and_load_on_the_shipped_tower(tmp_path):
    from inputs.perception import level_caches, load_perception, read_settings
    folder = ROOT / "checkpoints/perception/synthclip-cnn16-heads"
    weights = folder / "perception.safetensors"
    card = (folder / "MODEL_CARD.md").read_text()
    assert hashlib.sha256(weights.read_bytes()).hexdigest() in card
    assert weights.stat().st_size + sum(p.stat().st_size for p in (ROOT / "checkpoints/backbone").rglob("*.safetensors")) \
        < 25 * 1024 * 1024
    backbone, fine_layer, heads_cfg = read_settings(folder)
    assert Path(backbone.pretrained) == Path("checkpoints/backbone/synthclip-cnn16") and fine_layer == 2
    heads = load_perception(folder, level_caches(backbone, tmp_path / "cache", fine_layer), heads_cfg)
    assert not heads.training and sum(p.numel() for p in heads.parameters()) > 0
