"""The shipped in-domain CLIP towers (the default, synthclip-cnn16, and the ViT before it,
synthclip-s16): each committed file is the one its model card names, they load strictly through
open_clip, and the default gives the shapes the default config expects."""
from __future__ import annotations

import dataclasses
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


def test_the_shipped_perception_heads_predict_the_records_they_always_did(tmp_path):
    """The shipped heads (``perception.json`` names no neck: the plain layout) keep predicting the
    records they predicted before the feature pyramid existed: four val images of the default
    benchmark (tests/data/perception, a spatial view, a marked one, two temporal frames) against
    the records the code of commit b0a4bb1 predicted for them (tests/snapshots/, 1 thread).
    Floats may move in their last rounded digit with the thread count; classes may not."""
    from inputs.perception import load_perception, perception_source, predict_records, read_settings
    folder = ROOT / "checkpoints/perception/synthclip-cnn16-heads"
    backbone, fine_layer, heads_cfg = read_settings(folder)
    assert heads_cfg.neck == "plain" and backbone.image_size == 160
    source = perception_source(backbone, tmp_path / "cache", fine_layer, heads_cfg)
    heads = load_perception(folder, source, heads_cfg)
    paths = sorted(str(p.resolve()) for p in (ROOT / "tests/data/perception").glob("*.png"))
    got = {Path(p).name: recs for p, recs in predict_records(heads, paths, source).items()}
    want = json.loads((ROOT / "tests/snapshots/shipped_perception_records.json").read_text())
    assert sorted(got) == sorted(want) and sum(map(len, want.values())) >= 20
    tolerance = {"box": 0.11, "score": 2e-4, "contact_p": 2e-3}
    for name, records in want.items():
        assert len(got[name]) == len(records), name
        for new, old in zip(got[name], records):
            assert set(new) == set(old), name
            for key, value in old.items():
                if key in tolerance:
                    assert torch.allclose(torch.tensor(new[key], dtype=torch.float64),
                                          torch.tensor(value, dtype=torch.float64), atol=tolerance[key], rtol=0), (name, key)
                else:
                    assert new[key] == value, (name, key)


def test_the_shipped_cnn_runs_at_the_native_224_px_and_a_vit_refuses_another_size():
    """The CNN's weights stay as shipped while it reads the renders' own 224 px (a 56 / 28 / 14-cell
    pyramid); the ViT's position embeddings fix its size, so another one is refused."""
    cfg = dataclasses.replace(BackboneConfig(), image_size=224)
    tower = build_backbone(cfg)
    assert tower.grid_size == (14, 14) and not any(p.requires_grad for p in tower.parameters())
    maps = tower.feature_maps(torch.randn(1, 3, 224, 224), [1, 2, 3])
    assert [tuple(m.shape[1:]) for m in maps] == [(64, 56, 56), (128, 28, 28), (256, 14, 14)]
    vit = "checkpoints/backbone/synthclip-s16"
    with pytest.raises(ValueError, match="ViT"):
        build_backbone(BackboneConfig(arch="synthclip-s16", pretrained=vit, patch_layer=-1, image_size=224))
