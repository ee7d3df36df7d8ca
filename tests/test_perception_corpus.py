"""The perception corpus (pretrain/perception_corpus.py): seeds no benchmark uses, shards in the
generator's entity record format, resumable, never half-written."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_CORPUS

from bench.entities import KIND_FIELDS
from bench.synth.config import SynthConfig
from bench.synth.generate import SEED_TAGS
from bench.synth.scene import sample_scene
from bench.synth.scene_temporal import sample_temporal_scene
from common.config import load_config
from pretrain import perception_corpus
from pretrain.corpus import SPATIAL_TAG as TOWER_SPATIAL, TEMPORAL_TAG as TOWER_TEMPORAL
from pretrain.fit_readout import READOUT_TAGS
from pretrain.perception_corpus import (SPATIAL_TAG, TEMPORAL_TAG, PerceptionCorpusConfig, build_corpus,
                                        corpus_items, draw_corpus_marks, finished_shards)

ROOT = Path(__file__).resolve().parents[1]
TINY = PerceptionCorpusConfig(**TINY_CORPUS)


def _keys(seed: int, tag: int, n: int) -> set:
    return {tuple(np.random.default_rng([seed, tag, i]).integers(0, 2 ** 62, 4)) for i in range(n)}


def test_the_corpus_streams_are_no_benchmarks_streams():
    """Disjoint by construction: the corpus's stream tags are no other stream's, so no key [seed, tag,
    i] of the corpus is a benchmark's, whatever the seeds. Checked on the streams themselves for the
    scenes of a 40k-image corpus against every config in configs/bench/, and on the scenes."""
    assert {SPATIAL_TAG, TEMPORAL_TAG}.isdisjoint({*SEED_TAGS.values(), TOWER_SPATIAL, TOWER_TEMPORAL, *READOUT_TAGS})
    cfg = PerceptionCorpusConfig()
    synth = cfg.synth()
    shards = int(40_000 / cfg.images_per_shard(synth)) + 1
    ours = _keys(cfg.seed, SPATIAL_TAG, shards * cfg.spatial_per_shard) | \
        _keys(cfg.seed, TEMPORAL_TAG, shards * cfg.temporal_per_shard)
    for path in sorted((ROOT / "configs/bench").glob("*.yaml")):
        bench = load_config(SynthConfig, path)
        theirs = (_keys(bench.seed, SEED_TAGS["spatial"], bench.n_scenes + bench.extra_train_scenes)
                  | _keys(bench.seed, SEED_TAGS["temporal"], bench.temporal.n_scenes + bench.temporal.extra_train_scenes))
        assert not ours & theirs, path

    def people(scene):
        return tuple((p.shirt, round(float(p.xy[0]), 4), round(float(p.xy[1]), 4)) for p in scene.persons)
    for sample, tag, theirs in ((sample_scene, SPATIAL_TAG, SEED_TAGS["spatial"]),
                                (sample_temporal_scene, TEMPORAL_TAG, SEED_TAGS["temporal"])):
        corpus = {people(sample(np.random.default_rng([cfg.seed, tag, i]), synth, "c")) for i in range(8)}
        bench = {people(sample(np.random.default_rng([synth.seed, theirs, i]), synth, "b")) for i in range(8)}
        assert len(corpus) == 8 and not corpus & bench


def test_shards_hold_images_and_the_generators_records_and_resume(tmp_path):
    first = build_corpus(TINY, tmp_path / "corpus", 5, workers=1, progress=False)
    assert first["rendered"] >= 1 and first["images"] >= 5
    items = corpus_items(tmp_path / "corpus")
    assert len(items) == first["images"]
    spatial = [r for p, r in items if "/ps" in p]
    temporal = [p for p, _ in items if "/pt" in p]
    assert spatial and temporal and all(Path(p).name.split("_f")[1][:2].isdigit() for p in temporal)
    for path, records in items:
        assert Path(path).is_file()
        for rec in records:
            assert {"id", "kind", "box"} | set(KIND_FIELDS[rec["kind"]]) <= set(rec)
    assert any(records for records in spatial)
    # a larger corpus renders only the shards it lacks; its first images stay where they were
    stamp = (tmp_path / "corpus/shard-00000/labels.jsonl.gz").stat().st_mtime_ns
    more = build_corpus(TINY, tmp_path / "corpus", first["images"] + 10, workers=1, progress=False)
    assert more["shards"] > first["shards"] and more["rendered"] == more["shards"] - first["shards"]
    assert (tmp_path / "corpus/shard-00000/labels.jsonl.gz").stat().st_mtime_ns == stamp
    assert corpus_items(tmp_path / "corpus", first["images"]) == items
    assert build_corpus(TINY, tmp_path / "corpus", 5, workers=1, progress=False)["rendered"] == 0
    with pytest.raises(ValueError, match="--images 100000"):
        corpus_items(tmp_path / "corpus", 100_000)
    with pytest.raises(ValueError, match="another config"):
        build_corpus(PerceptionCorpusConfig(seed=1, synth_overrides=TINY.synth_overrides), tmp_path / "corpus", 5,
                     workers=1, progress=False)


def test_a_failing_shard_leaves_nothing_behind_and_the_rerun_completes(tmp_path, monkeypatch):
    real = perception_corpus._temporal_scene

    def fail_on_the_second(cfg, synth, idx, folder):
        if idx == 1:
            raise RuntimeError("renderer crashed")
        return real(cfg, synth, idx, folder)
    monkeypatch.setattr(perception_corpus, "_temporal_scene", fail_on_the_second)
    with pytest.raises(RuntimeError, match="renderer crashed"):
        build_corpus(TINY, tmp_path / "corpus", 30, workers=1, progress=False)
    assert finished_shards(tmp_path / "corpus") == [0]
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == ["corpus.json", "shard-00000"]
    monkeypatch.setattr(perception_corpus, "_temporal_scene", real)
    again = build_corpus(TINY, tmp_path / "corpus", 30, workers=1, progress=False)
    assert finished_shards(tmp_path / "corpus") == list(range(again["shards"])) and again["images"] >= 30


def test_marks_are_drawn_on_a_share_of_the_views():
    from PIL import Image
    image = Image.new("RGB", (64, 64), (90, 90, 90))
    person = {"id": 3, "kind": "person", "box": [10, 12, 30, 50]}
    same, marked = draw_corpus_marks(image, [person], np.random.default_rng(0), 0.0)
    assert same is image and not marked
    drawn, marked = draw_corpus_marks(image, [person], np.random.default_rng(0), 1.0)
    assert marked and np.asarray(drawn).std() > 0
    assert draw_corpus_marks(image, [], np.random.default_rng(0), 1.0) == (image, False)  # nobody to mark
