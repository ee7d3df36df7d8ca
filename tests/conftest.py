"""Shared fixtures. Every test runs offline: no hub, no download."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# The image index (bench/images.py) of test benchmarks goes to a throw-away folder, not ~/.cache.
os.environ.setdefault("CROSSVIEW_CACHE_DIR", tempfile.mkdtemp(prefix="crossview-test-cache-"))
# The tests' own helpers (tests/*.py), and this checkout's root for ``scripts`` (run as
# ``python -m scripts.<name>`` from the root; not an installed package).
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]

from eval.fake_endpoint import FakeEndpoint  # noqa: E402
from bench.tiny import make_tiny_benchmark  # noqa: E402


@pytest.fixture
def tiny_bench(tmp_path: Path) -> Path:
    """A valid tiny benchmark folder (16 samples, 4 views, 32 px, cameras on most views)."""
    return make_tiny_benchmark(tmp_path / "bench")


@pytest.fixture
def endpoint():
    """Start local chat-completions servers (eval/fake_endpoint.py); all are closed after the test."""
    servers: list[FakeEndpoint] = []

    def start(script=(), after="ok", **kwargs) -> FakeEndpoint:
        servers.append(FakeEndpoint(script, after, **kwargs))
        return servers[-1]
    yield start
    for server in servers:
        server.close()


# A tiny generated benchmark (64 px renders, entity labels beside the splits): what the entity
# model trains and scores on in tests.
TINY_SYNTH = ["n_scenes=8", "render.width=64", "render.height=64", "workers=1", "tasks.per_scene=3",
              "temporal.n_scenes=2", "temporal.per_scene=3"]


@pytest.fixture(scope="session")
def synth_bench(tmp_path_factory) -> Path:
    """A tiny synthetic benchmark with train/, val/, test/ and labels/ (shared by the session: read only)."""
    from bench.synth.config import SynthConfig
    from bench.synth.generate import generate
    from common.config import load_config
    out = tmp_path_factory.mktemp("synth") / "bench"
    generate(load_config(SynthConfig, None, TINY_SYNTH), out, progress=False)
    return out


def write_tiny_perception(folder: Path, cache_dir: Path, heat_bias: float = 3.0) -> Path:
    """Untrained perception heads on a tiny random tower, written as a perception folder; a centre
    bias of 3 makes them find something in every image."""
    import json

    import torch
    from safetensors.torch import save_file

    from bench.entities import FIELDS
    from inputs.entity_batch import CONTACT_WIDTH
    from inputs.perception import level_caches, settings_of
    from model.config import tiny_backbone_config
    from model.perception import PerceptionConfig, PerceptionHeads
    caches = level_caches(tiny_backbone_config(), cache_dir, fine_layer=-1)
    torch.manual_seed(0)
    cfg = PerceptionConfig(in_dim=caches.coarse.expected_shapes()["patch_tokens"][-1], width=16, max_entities=6)
    heads = PerceptionHeads(cfg, FIELDS, CONTACT_WIDTH)
    torch.nn.init.constant_(heads.heat.bias, heat_bias)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in heads.state_dict().items()}, str(folder / "perception.safetensors"))
    (folder / "perception.json").write_text(json.dumps(settings_of(caches, cfg)))
    return folder


@pytest.fixture(scope="session")
def tiny_perception(tmp_path_factory) -> Path:
    """A perception folder of untrained heads on the tiny random tower (see ``write_tiny_perception``)."""
    import warnings
    root = tmp_path_factory.mktemp("perception")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")
        return write_tiny_perception(root / "heads", root / "cache")


# A tiny perception corpus (pretrain.perception_corpus): 64 px renders, one spatial and one temporal
# scene a shard.
TINY_CORPUS = {"spatial_per_shard": 1, "temporal_per_shard": 1, "frames_per_view": 1,
               "synth_overrides": ["render.width=64", "render.height=64"]}


@pytest.fixture(scope="session")
def perception_corpus(tmp_path_factory) -> Path:
    """A perception corpus of at least 12 tiny images (shared by the session: read only)."""
    from pretrain.perception_corpus import PerceptionCorpusConfig, build_corpus
    root = tmp_path_factory.mktemp("perception-corpus") / "corpus"
    build_corpus(PerceptionCorpusConfig(**TINY_CORPUS), root, 12, workers=1, progress=False)
    return root
