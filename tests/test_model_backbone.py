"""Frozen open_clip backbone (tiny custom ViT, no download)."""
import dataclasses

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


def test_pixel_cells_append_each_cells_subsampled_pixels():
    cfg = dataclasses.replace(tiny_backbone_config(), pixel_cells=2)
    with pytest.warns(UserWarning):
        plain = build_backbone(tiny_backbone_config())
        pixels = build_backbone(cfg)
    assert pixels.patch_dim == plain.patch_dim + 12 and pixels.pooled_dim == plain.pooled_dim
    assert pixels.identity != plain.identity  # a different cache key
    images = torch.zeros(1, 3, 32, 32)
    images[0, 0, :8, 8:16] = 1.0  # red channel of grid cell (row 0, col 1)
    images[0, 2, 28:, :4] = 2.0   # blue channel, bottom-left sub-cell of cell (3, 0)
    out = pixels(images)["patch_tokens"][0]
    torch.testing.assert_close(out[:, :plain.patch_dim], plain(images)["patch_tokens"][0])
    cells = out[:, plain.patch_dim:].view(16, 3, 2, 2)  # (cell, channel, sub-row, sub-col)
    assert torch.equal(cells[1, 0], torch.ones(2, 2)) and cells[1, 1:].abs().sum() == 0
    assert cells[12, 2, 1, 0] == 2.0 and cells[12].abs().sum() == 2.0
    assert cells[[0, 2, 3, 4, 15]].abs().sum() == 0


def test_a_missing_pretrained_folder_is_one_line_naming_the_key(tmp_path, capsys):
    """model.backbone.pretrained is resolved in one place (inputs.backbone.locate_pretrained): a
    path that names nothing stops build_components, and python train.py, with one line naming the
    key, before anything is generated or written."""
    import train
    from common.config import ConfigError
    from inputs.backbone import build_components
    from model import ModelConfig
    cfg = ModelConfig()
    cfg.backbone.pretrained = str(tmp_path / "no-such-tower")
    with pytest.raises(ConfigError) as err:
        build_components(cfg)
    message = str(err.value)
    assert "\n" not in message and message.startswith("model.backbone.pretrained=") and "no-such-tower" in message
    out = tmp_path / "runs"
    code = train.main([f"model.backbone.pretrained={tmp_path / 'no-such-tower'}", f"out_dir={out}",
                       f"data.bench_dir={tmp_path / 'bench'}", f"data.cache_dir={tmp_path / 'cache'}"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("config error: model.backbone.pretrained=")
    assert not out.exists() and not (tmp_path / "bench").exists()


def test_pretrained_names_a_folder_a_file_or_an_open_clip_tag(tmp_path):
    from inputs.backbone import locate_pretrained
    assert locate_pretrained(None) is None
    assert locate_pretrained("openai") == "openai"  # a tag for backbone.arch, left to open_clip
    weights = tmp_path / "tower.bin"
    weights.write_bytes(b"")
    assert locate_pretrained(str(weights)) == weights.resolve()
    assert locate_pretrained("checkpoints/backbone/synthclip-cnn16").name == "synthclip-cnn16"
