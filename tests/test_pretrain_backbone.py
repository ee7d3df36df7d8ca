"""The in-domain CLIP pretraining: caption grammar, corpus seeds apart from the benchmark's,
a tiny end-to-end run (train, resume, export, load strictly through open_clip)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from common.config import load_config
from bench.synth.captions import IGNORE, CaptionTokenizer, caption_vocabulary, person_facts, view_caption
from bench.synth.config import SynthConfig
from bench.synth.generate import build_scene
from bench.synth.scene import sample_scene
from inputs.backbone import build_backbone
from model.config import BackboneConfig
from pretrain.tower import PretrainConfig, pretrain
from pretrain.corpus import SPATIAL_TAG, TEMPORAL_TAG, CorpusConfig

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = {"embed_dim": 16,
              "vision_cfg": {"image_size": 32, "layers": 1, "width": 16, "head_width": 8, "patch_size": 8},
              "text_cfg": {"context_length": 128, "vocab_size": CaptionTokenizer().vocab_size, "width": 16,
                           "heads": 2, "layers": 1}}


def test_tokenizer_closed_vocabulary():
    tok = CaptionTokenizer()
    ids = tok(["2 people . person : red shirt , waving", "a zebra"])
    assert ids.shape == (2, 128)
    assert ids[0, 0] == tok.SOT and int(ids[0].max()) == tok.eot  # open_clip pools at the argmax id
    assert (ids[1, 1:3] == tok.UNK).all()
    assert tok.encode("Red SHIRT") == [tok.index["red"], tok.index["shirt"]]
    assert CaptionTokenizer(drop_unknown=True).encode("How many red shirts?") == [tok.index["red"]]


def test_caption_names_what_the_view_shows():
    cfg = load_config(SynthConfig, ROOT / "configs/bench/default.yaml")
    scene, _, obs, _ = build_scene(cfg, 3)
    view = scene.cameras[0].view_id
    facts = person_facts(scene, obs[view])
    assert len(facts) == sum(r["seen"] for r in obs[view]["persons"].values())
    assert [f["box"][0] + f["box"][2] for f in facts] == sorted(f["box"][0] + f["box"][2] for f in facts)
    words = caption_vocabulary()
    cap = view_caption(facts, ["red box"], marks={facts[0]["pid"]: "4"} if facts else None)
    assert all(w in words for w in cap.split()), cap
    assert cap.startswith(f"{len(facts)} ")
    for f in facts:
        person = scene.person(f["pid"])
        if f["shirt"] != IGNORE:
            assert f"{person.shirt} shirt" in cap


def _stream_keys(seed: int, tag: int, n: int) -> set:
    return {tuple(np.random.default_rng([seed, tag, i]).integers(0, 2 ** 62, 4)) for i in range(n)}


@pytest.mark.parametrize("config", sorted(p.name for p in (ROOT / "configs/backbone").glob("*.yaml")
                                           if not p.name.endswith("-readout.yaml")))  # fit_readout's own tags
def test_shipped_corpus_never_draws_a_benchmark_scene(config):
    """Scenes are functions of their random streams: disjoint streams, disjoint scenes."""
    pre = load_config(PretrainConfig, ROOT / "configs/backbone" / config)
    bench = load_config(SynthConfig, ROOT / pre.corpus.bench_config)
    corpus = _stream_keys(pre.corpus.seed, SPATIAL_TAG, pre.corpus.n_spatial) | \
        _stream_keys(pre.corpus.seed, TEMPORAL_TAG, pre.corpus.n_temporal)
    for path in sorted((ROOT / "configs/bench").glob("*.yaml")):
        cfg = load_config(SynthConfig, path)
        benchmark = (_stream_keys(cfg.seed, 2, cfg.n_scenes + cfg.extra_train_scenes)
                     | _stream_keys(cfg.seed, 4, cfg.temporal.n_scenes + cfg.temporal.extra_train_scenes))
        assert not corpus & benchmark, path
    # and directly, on the first scenes: people and cameras differ
    def fingerprint(scene):
        return (tuple((p.shirt, round(p.xy[0], 4), round(p.xy[1], 4)) for p in scene.persons),
                tuple(round(float(c.t[0]), 4) for c in scene.cameras))
    ours = {fingerprint(sample_scene(np.random.default_rng([pre.corpus.seed, SPATIAL_TAG, i]), bench, "p"))
            for i in range(20)}
    theirs = {fingerprint(sample_scene(np.random.default_rng([bench.seed, 2, i]), bench, "s")) for i in range(20)}
    assert len(ours) == 20 and not ours & theirs


def _tiny_config(tmp_path: Path, **over) -> PretrainConfig:
    model_json = tmp_path / "tiny_synthclip.json"
    model_json.write_text(json.dumps(TINY_MODEL))
    corpus = CorpusConfig(bench_config=str(ROOT / "configs/bench/default.yaml"), n_spatial=3, n_temporal=1,
                          frames_per_view=1, image_size=32, grid=4, workers=1)
    cfg = PretrainConfig(model_config=str(model_json), corpus=corpus, corpus_file=str(tmp_path / "corpus.pt"),
                         epochs=2, batch_size=4, warmup_steps=1, ckpt_every=2, log_every=1)
    for k, v in over.items():
        setattr(cfg, k, v)
    return cfg


@pytest.mark.slow
def test_tiny_pretraining_resumes_exports_and_loads(tmp_path):
    cfg = _tiny_config(tmp_path)
    whole = pretrain(cfg, tmp_path / "whole", progress=False)
    assert whole["steps"] >= 4 and (tmp_path / "whole/loss.png").stat().st_size > 0
    # an interrupted run continues from its saved state to the same weights
    pretrain(cfg, tmp_path / "cut", progress=False, stop_after=2)
    assert (tmp_path / "cut/train_state.pt").is_file() and not (tmp_path / "cut/open_clip_model.safetensors").exists()
    resumed = pretrain(cfg, tmp_path / "cut", progress=False)
    assert resumed["sha256"] == whole["sha256"]
    backbone = build_backbone(BackboneConfig(arch="tiny-synthclip", pretrained=str(tmp_path / "whole"), image_size=32,
                                             patch_layer=-1, pooled_source="clip"))
    out = backbone(torch.randn(2, 3, 32, 32))
    assert out["patch_tokens"].shape == (2, 16, 16) and out["pooled"].shape == (2, 16)
    # a weights file that does not fit the config is refused, not silently half-loaded
    from safetensors.torch import load_file, save_file
    weights = load_file(str(tmp_path / "whole/open_clip_model.safetensors"))
    weights.pop(next(k for k in weights if k.startswith("visual.")))
    save_file(weights, str(tmp_path / "whole/open_clip_model.safetensors"))
    with pytest.raises(RuntimeError):
        build_backbone(BackboneConfig(arch="tiny-synthclip", pretrained=str(tmp_path / "whole"), image_size=32))


@pytest.mark.slow
def test_pretraining_with_a_readout_continues_a_tower_and_exports_both(tmp_path):
    """Continued pretraining (init_from) with the semantic readout: the readout learns the
    corpus's grids beside the heads and resumes with them."""
    from pretrain.tower import ReadoutHeadConfig
    base = pretrain(_tiny_config(tmp_path, epochs=1), tmp_path / "base", progress=False)
    cfg = _tiny_config(tmp_path, init_from=str(tmp_path / "base"), corpus_file=str(tmp_path / "semantic.pt"),
                       readout=ReadoutHeadConfig(enabled=True, depth=1, width=16, heads=2))
    cfg.corpus.semantic = True
    whole = pretrain(cfg, tmp_path / "v2", progress=False)
    assert whole["sha256"] != base["sha256"]
    rows = (tmp_path / "v2/log.csv").read_text().splitlines()
    assert "semantic" in rows[0].split(",")
    pretrain(cfg, tmp_path / "cut", progress=False, stop_after=2)
    resumed = pretrain(cfg, tmp_path / "cut", progress=False)
    assert resumed["sha256"] == whole["sha256"]
    assert (tmp_path / "cut/readout/readout.safetensors").read_bytes() == \
        (tmp_path / "v2/readout/readout.safetensors").read_bytes()
    # a readout without semantic grids in the corpus is refused before training
    plain = _tiny_config(tmp_path, readout=ReadoutHeadConfig(enabled=True))
    with pytest.raises(ValueError, match="semantic"):
        pretrain(plain, tmp_path / "refused", progress=False)


@pytest.mark.slow
def test_a_timm_cnn_tower_pretrains_exports_and_serves_its_stride_16_stage(tmp_path):
    """A convolutional tower (open_clip's timm path, ``vision_cfg.timm_model_name``): the heads
    read the stage ``grid_level`` names, the export loads strictly through open_clip, and the
    backbone serves that stage's grid (``patch_layer``) with its own width."""
    model_json = tmp_path / "tiny_synthcnn.json"
    model_json.write_text(json.dumps({**TINY_MODEL, "vision_cfg": {
        "timm_model_name": "test_resnet", "timm_model_pretrained": False, "timm_pool": "avg",
        "timm_proj": "linear", "image_size": 64}}))
    cfg = _tiny_config(tmp_path, model_config=str(model_json), grid_level=3, epochs=1)
    cfg.corpus.image_size = 64  # test_resnet's stage 3 has stride 16: a 4 x 4 grid
    whole = pretrain(cfg, tmp_path / "cnn", progress=False)
    assert whole["steps"] >= 1
    assert "convolutional image tower (timm `test_resnet`" in (tmp_path / "cnn/MODEL_CARD.md").read_text()
    backbone = build_backbone(BackboneConfig(arch="tiny-synthcnn", pretrained=str(tmp_path / "cnn"), image_size=64,
                                             patch_layer=3, pooled_source="clip"))
    assert backbone.grid_size == (4, 4) and backbone.patch_dim == 192
    out = backbone(torch.randn(2, 3, 64, 64))
    assert out["patch_tokens"].shape == (2, 16, 192) and out["pooled"].shape == (2, 16)
    early = build_backbone(BackboneConfig(arch="tiny-synthcnn", pretrained=str(tmp_path / "cnn"), image_size=64,
                                          patch_layer=3, pooled_source="patch_mean"))
    assert torch.allclose(early(torch.ones(1, 3, 64, 64))["patch_tokens"], backbone(torch.ones(1, 3, 64, 64))["patch_tokens"])
    # a level whose stride does not give the corpus's label grid is refused before training
    with pytest.raises(ValueError, match="grid_level"):
        pretrain(_tiny_config(tmp_path, model_config=str(model_json), grid_level=2, corpus_file=cfg.corpus_file),
                 tmp_path / "bad", progress=False)
