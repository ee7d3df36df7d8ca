"""The feature cache: one encode per unique image, invalidation on change, corrupt entries rebuilt."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from inputs.features import FeatureCache
from inputs.backbone import build_backbone
from model.config import tiny_backbone_config


@pytest.fixture(scope="module")
def backbone():
    with pytest.warns(UserWarning, match="NO pretrained weights"):
        return build_backbone(tiny_backbone_config())


def _images(folder, n, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def test_encodes_each_unique_image_once(tmp_path, backbone):
    paths = _images(tmp_path / "img", 5)
    (tmp_path / "img/copy.png").write_bytes(paths[0].read_bytes())  # same content, other name
    cache = FeatureCache(tmp_path / "cache", backbone)
    table = cache.table(paths + paths + [tmp_path / "img/copy.png"])
    assert cache.n_encoded == 5
    assert table.patch_tokens.shape[0] == 5 and table.patch_tokens.dtype == torch.float16
    assert table.index[str(paths[0].resolve())] == table.index[str((tmp_path / "img/copy.png").resolve())]
    assert table.sizes[str(paths[0].resolve())] == (32, 32)
    again = FeatureCache(tmp_path / "cache", backbone)
    table2 = again.table(paths)
    assert again.n_encoded == 0
    assert torch.equal(table2.patch_tokens, table.patch_tokens)


def test_features_match_direct_encoding(tmp_path, backbone):
    from inputs.features import load_image_tensor
    paths = _images(tmp_path / "img", 2)
    table = FeatureCache(tmp_path / "cache", backbone).table(paths)
    x = torch.stack([load_image_tensor(p, backbone.cfg.image_size, backbone.cfg.mean, backbone.cfg.std) for p in paths])
    direct = backbone(x)["patch_tokens"]
    assert torch.allclose(table.patch_tokens.float(), direct, atol=2e-2)


def test_changed_image_invalidates_its_entry(tmp_path, backbone):
    paths = _images(tmp_path / "img", 3)
    cache = FeatureCache(tmp_path / "cache", backbone)
    before = cache.table(paths)
    Image.fromarray(np.zeros((32, 32, 3), dtype=np.uint8)).save(paths[1])
    cache2 = FeatureCache(tmp_path / "cache", backbone)
    after = cache2.table(paths)
    assert cache2.n_encoded == 1
    row = lambda t, p: t.patch_tokens[t.index[str(p.resolve())]]
    assert torch.equal(row(before, paths[0]), row(after, paths[0]))
    assert not torch.equal(row(before, paths[1]), row(after, paths[1]))


def test_corrupt_entry_is_rebuilt(tmp_path, backbone):
    paths = _images(tmp_path / "img", 2)
    cache = FeatureCache(tmp_path / "cache", backbone)
    good = cache.table(paths)
    entries = sorted(cache.dir.rglob("*.safetensors"))
    assert len(entries) == 2
    entries[0].write_bytes(b"garbage")
    cache2 = FeatureCache(tmp_path / "cache", backbone)
    rebuilt = cache2.table(paths)
    assert cache2.n_encoded == 1
    assert torch.equal(good.patch_tokens, rebuilt.patch_tokens)


def test_other_backbone_gets_other_entries(tmp_path, backbone):
    paths = _images(tmp_path / "img", 2)
    FeatureCache(tmp_path / "cache", backbone).table(paths)
    cfg = tiny_backbone_config()
    cfg.init_seed = 1
    with pytest.warns(UserWarning):
        other = build_backbone(cfg)
    cache = FeatureCache(tmp_path / "cache", other)
    cache.table(paths)
    assert cache.n_encoded == 2


def test_wrong_shape_entry_is_rebuilt(tmp_path, backbone):
    """Right key, wrong tensor shape (say a cache written by another layer setting): rebuilt, not stacked."""
    from safetensors.torch import load_file, save_file
    paths = _images(tmp_path / "img", 2)
    cache = FeatureCache(tmp_path / "cache", backbone)
    good = cache.table(paths)
    entry = sorted(cache.dir.rglob("*.safetensors"))[0]
    tensors = load_file(str(entry))
    tensors["patch_tokens"] = tensors["patch_tokens"][:-1].contiguous()  # one token short
    save_file(tensors, str(entry))
    cache2 = FeatureCache(tmp_path / "cache", backbone)
    rebuilt = cache2.table(paths)
    assert cache2.n_encoded == 1
    assert torch.equal(good.patch_tokens, rebuilt.patch_tokens)


def test_flipped_bits_are_caught_by_the_checksum(tmp_path, backbone):
    paths = _images(tmp_path / "img", 2)
    cache = FeatureCache(tmp_path / "cache", backbone)
    good = cache.table(paths)
    entry = sorted(cache.dir.rglob("*.safetensors"))[0]
    data = bytearray(entry.read_bytes())
    header_len = int.from_bytes(data[:8], "little")
    start, _ = json.loads(data[8:8 + header_len])["patch_tokens"]["data_offsets"]
    data[8 + header_len + start + 5] ^= 0x10  # one bit of one feature; the file still parses
    entry.write_bytes(bytes(data))
    cache2 = FeatureCache(tmp_path / "cache", backbone)
    rebuilt = cache2.table(paths)
    assert cache2.n_encoded == 1
    assert torch.equal(good.patch_tokens, rebuilt.patch_tokens) and torch.equal(good.pooled, rebuilt.pooled)
