"""CPU seconds per image of the perception corpus and its fit, on ``--threads`` threads (1 by default).

    python -m scripts.bench_perception [--out runs/bench_perception.json] [--threads 1] [--batch 8]
        [--widths 64,128]

1. render: one spatial and one temporal scene of the perception corpus (``configs/bench/default.yaml``
   at 224 px, images and entity records written), combined in a default shard's mix;
2. load: decoding and normalising those images for the tower;
3. tower: the frozen shipped tower at 224 px, its stride-4, 8 and 16 levels from one pass;
4. heads: the fpn neck and heads' forward, loss, backward and AdamW step at each width, on those
   images' levels and records (the tower's time not included); and their prediction (forward and
   decoding to records, no grad), what ``python train.py``'s perception step adds to load + tower;
5. level cache: what keeping the three levels in fp16 on disk would cost instead of the tower's pass:
   bytes an image, and the seconds to read one back (warm page cache: a lower bound).

Times are the process's CPU time (``time.process_time``), the best of ``--reps`` runs after a warm-up:
with 1 thread that is the wall time on an idle core, and it stays meaningful on a machine whose
cores are busy with other work. Prints and writes JSON.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import torch


def _timed(fn, reps: int) -> float:
    """The least CPU time of ``reps`` runs of ``fn`` after one warm-up, in seconds."""
    fn()
    best = float("inf")
    for _ in range(reps):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/bench_perception.json")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--widths", default="64,128")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from safetensors.torch import load_file, save_file

    from bench.entities import FIELDS
    from inputs.entity_batch import CONTACT_WIDTH
    from inputs.perception import tower_pyramid
    from model.config import BackboneConfig
    from model.perception import PerceptionHeads
    from pretrain.perception_corpus import PerceptionCorpusConfig, corpus_items, render_shard
    from pretrain.perception_corpus_fit import CorpusFitConfig
    from pretrain.perception_fit import _batch_targets, perception_loss

    out: dict = {"threads": args.threads, "batch": args.batch}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = PerceptionCorpusConfig()
        synth = corpus.synth()
        scene_s = {}
        for kind, one in (("spatial", dict(spatial_per_shard=1, temporal_per_shard=0)),
                          ("temporal", dict(spatial_per_shard=0, temporal_per_shard=1))):
            started = time.process_time()
            n = render_shard(dataclasses.replace(corpus, **one), synth, 0, Path(tmp) / kind)
            scene_s[kind] = time.process_time() - started
            out[f"render_{kind}_scene_s"], out[f"render_{kind}_scene_images"] = scene_s[kind], n
        shard_s = corpus.spatial_per_shard * scene_s["spatial"] + corpus.temporal_per_shard * scene_s["temporal"]
        out["render_s_per_image"] = shard_s / corpus.images_per_shard(synth)  # a default shard's mix
        items = (corpus_items(Path(tmp) / "spatial") + corpus_items(Path(tmp) / "temporal"))[:args.batch]
        paths = [p for p, _ in items]
        fit = CorpusFitConfig()
        source = tower_pyramid(BackboneConfig(image_size=224), fit.levels)
        out["load_s_per_image"] = _timed(lambda: source.images(paths), args.reps) / len(paths)
        images = source.images(paths)
        out["tower_s_per_image"] = _timed(lambda: source.maps(images), args.reps) / len(paths)
        maps = source.maps(images)
        out["level_shapes"] = [list(m.shape[1:]) for m in maps]
        for width in [int(w) for w in args.widths.split(",")]:
            torch.manual_seed(0)
            heads = PerceptionHeads(CorpusFitConfig(width=width).heads(source.level_dims()), FIELDS, CONTACT_WIDTH)
            opt = torch.optim.AdamW(heads.parameters(), lr=1e-3)
            targets = _batch_targets([r for _, r in items], maps[0].shape[-1], (224.0, 224.0))

            def step():
                terms = perception_loss(heads, heads(*maps), targets)
                opt.zero_grad()
                terms["loss"].backward()
                opt.step()
            out[f"heads_w{width}_s_per_image"] = _timed(step, args.reps) / len(paths)
            heads.eval()

            @torch.no_grad()
            def predict():
                heads.decode(heads(*maps), (224, 224))
            out[f"predict_w{width}_s_per_image"] = _timed(predict, args.reps) / len(paths)
            heads.train()
            out[f"heads_w{width}_parameters"] = sum(p.numel() for p in heads.parameters())
        files = []
        for i in range(len(paths)):
            files.append(Path(tmp) / f"levels{i}.safetensors")
            save_file({f"l{k}": m[i].half().contiguous() for k, m in enumerate(maps)}, str(files[-1]))
        out["level_cache_bytes_per_image"] = sum(f.stat().st_size for f in files) / len(files)
        out["level_cache_read_s_per_image"] = _timed(
            lambda: [[t.float() for t in load_file(str(f)).values()] for f in files], args.reps) / len(files)
    for key, value in out.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
