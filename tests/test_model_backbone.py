"""Frozen open_clip backbone (tiny custom ViT, no download)."""
import dataclasses

import numpy as np
import pytest
import torch

from inputs.backbone import build_backbone
from model import preprocess_constants, tiny_backbone_config


@pytest.fixture(scope="module")
def backbone():
    with pytest.warns(UserWarning, match="NO pretrained weights"):
        return build_backbone(tiny_backbone_config())


def test_backbone_is_frozen_and_stays_in_eval(backbone):
    backbone.train()
    assert not backbone.training and not any(m.training for m in backbone.modules())
    assert not any(p.requires_grad for p in backbone.parameters())
    images = torch.randn(3, 3, 32, 32, requires_grad=True)
    out = backbone(images)
    assert not out["patch_tokens"].requires_grad and not out["pooled"].requires_grad


def test_backbone_outputs_patch_grid_and_pooled(backbone):
    out = backbone(torch.randn(2, 3, 32, 32))
    assert out["patch_tokens"].shape == (2, 16, backbone.patch_dim)  # 4x4 grid of 8-px patches
    assert out["pooled"].shape == (2, backbone.pooled_dim)
    assert backbone.grid_size == (4, 4)


def test_pooled_matches_encode_image_and_grid_pooling():
    cfg = tiny_backbone_config()
    with pytest.warns(UserWarning):
        plain = build_backbone(cfg)
        pooled_grid = build_backbone(dataclasses.replace(cfg, pool_grid=2))
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(plain(images)["pooled"], plain.visual(images))
    assert pooled_grid(images)["patch_tokens"].shape == (2, 4, plain.patch_dim)
    assert pooled_grid.grid_size == (2, 2)


def test_identity_names_architecture_weights_and_size(backbone):
    cfg = tiny_backbone_config()
    with pytest.warns(UserWarning):
        same = build_backbone(cfg)
        reseeded = build_backbone(dataclasses.replace(cfg, init_seed=1))
    assert same.identity == backbone.identity  # seeded random init is reproducible
    assert reseeded.identity != backbone.identity
    assert backbone.identity.startswith("tiny-vit-") and "32px" in backbone.identity
    consts = preprocess_constants(cfg)
    assert consts["image_size"] == 32 and len(consts["mean"]) == 3 and len(consts["std"]) == 3


def test_a_missing_pretrained_folder_is_one_line_naming_the_key(tmp_path):
    """The tower's pretrained folder is resolved in one place (inputs.backbone.locate_pretrained): a
    path that names nothing is one line naming the key."""
    from common.config import ConfigError
    from inputs.backbone import locate_pretrained
    with pytest.raises(ConfigError) as err:
        locate_pretrained(str(tmp_path / "no-such-tower"))
    message = str(err.value)
    assert "\n" not in message and message.startswith("model.backbone.pretrained=") and "no-such-tower" in message


def test_pretrained_names_a_folder_a_file_or_an_open_clip_tag(tmp_path):
    from inputs.backbone import locate_pretrained
    assert locate_pretrained(None) is None
    assert locate_pretrained("openai") == "openai"  # a tag for backbone.arch, left to open_clip
    weights = tmp_path / "tower.bin"
    weights.write_bytes(b"")
    assert locate_pretrained(str(weights)) == weights.resolve()
    assert locate_pretrained("checkpoints/backbone/synthclip-cnn16").name == "synthclip-cnn16"


def test_both_levels_come_from_one_pass_and_fill_both_caches(tmp_path):
    """encode_levels gives each level what its own forward gives; fill_together writes both
    caches from one pass per batch, so their tables then encode nothing."""
    from inputs.backbone import load_clip, tower_from_clip
    from inputs.features import FeatureCache, fill_together
    from model.backbone import encode_levels
    from PIL import Image
    cfg = tiny_backbone_config()
    with pytest.warns(UserWarning):
        clip = load_clip(cfg, None)
    coarse = tower_from_clip(clip, cfg, None)
    fine = tower_from_clip(clip, dataclasses.replace(cfg, patch_layer=0), None)
    images = torch.randn(3, 3, 32, 32)
    both = encode_levels([coarse, fine], images)
    for tower, got in zip((coarse, fine), both):
        want = tower(images)
        torch.testing.assert_close(got["patch_tokens"], want["patch_tokens"])
        torch.testing.assert_close(got["pooled"], want["pooled"])
    with pytest.raises(ValueError, match="share one image tower"):
        encode_levels([coarse, tower_from_clip(load_clip(cfg, None), cfg, None)], images)
    paths = []
    for i in range(5):
        paths.append(tmp_path / f"im{i}.png")
        Image.fromarray((np.random.default_rng(i).random((32, 32, 3)) * 255).astype("uint8")).save(paths[-1])
    caches = [FeatureCache(tmp_path / "cache", coarse), FeatureCache(tmp_path / "cache", fine)]
    assert fill_together(caches, paths) == 5 and fill_together(caches, paths) == 0
    alone = FeatureCache(tmp_path / "alone", fine).table(paths)
    table = caches[1].table(paths)
    assert caches[1].n_encoded == 5  # by fill_together; table() found every entry
    torch.testing.assert_close(table.patch_tokens, alone.patch_tokens)


def test_a_cnn_tower_gives_its_stride_4_8_16_maps_from_one_pass_at_any_size():
    """feature_maps runs the trunk once, stopping after the deepest level asked (the stride-32
    stage never runs), and each map is the level the plain forward returns as tokens."""
    from model.config import tiny_cnn_backbone_config
    cfg = tiny_cnn_backbone_config(64)
    with pytest.warns(UserWarning, match="NO pretrained weights"):
        tower = build_backbone(cfg)
    trunk = tower.visual.trunk
    stages = [trunk.get_submodule(info["module"]) for info in trunk.feature_info]  # one per level
    calls = [0] * len(stages)
    for i, stage in enumerate(stages):
        stage.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
    for side in (64, 96):  # a CNN is not bound to its configured size
        calls[:] = [0] * len(stages)
        maps = tower.feature_maps(torch.randn(2, 3, side, side), [1, 2, 3])
        assert [tuple(m.shape) for m in maps] == [(2, c, side // s, side // s) for c, s in tower.level_shapes([1, 2, 3])]
        assert [tuple(m.shape[1:3]) for m in maps] == [(32, side // 4), (48, side // 8), (192, side // 16)]
        assert calls[:-1] == [1] * (len(stages) - 1) and calls[-1] == 0
    images = torch.randn(2, 3, 64, 64)
    tokens = tower(images)["patch_tokens"]  # level 3, as (N, P, C)
    torch.testing.assert_close(tower.feature_maps(images, [3])[0].flatten(2).transpose(1, 2), tokens)
    assert not maps[0].requires_grad
