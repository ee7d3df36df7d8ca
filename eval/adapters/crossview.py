"""Our trained model as one more adapter: ``--model crossview --model-arg ckpt=PATH``.

The entity model end to end: the shipped perception heads turn every image into entity records
(predicted once and cached, ``inputs.entity_records``; the tower's features come from the same
feature cache training filled), and the entity reasoner of the checkpoint scores every option
directly (no text, no parsing). Where the records come from is the argument ``entities``:

- ``model`` (default): what the checkpoint was trained on: the perception heads its run config
  names, or the generator's truth when the run was the entity ceiling;
- ``truth``: the generator's records (``<bench>/../labels/<split>.jsonl.gz``): the **entity
  ceiling**, an upper bound told the truth on purpose; its runs are named ``crossview-ceiling``
  in every output, never ``crossview``;
- a perception folder (``perception.safetensors``): other heads on the same tower.

Scoring a checkpoint imports neither training/ nor Lightning.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from bench.format import Benchmark
from eval.adapters.base import ModelAdapter, Request, Response, throughput
from eval.adapters.registry import register_model
from eval.errors import RunError

MODEL, TRUTH = "model", "truth"
CEILING_NAME = "crossview-ceiling"


@register_model("crossview")
class CrossViewAdapter(ModelAdapter):
    """The entity model (model/entity_reasoner.py on the shipped perception) from a checkpoint of python train.py."""

    @dataclass
    class Args:
        ckpt: str = ""  # a checkpoint written by python train.py (best.ckpt / last.ckpt)
        entities: str = MODEL  # "model" (the checkpoint's own), "truth" (the entity ceiling) or a perception folder
        cache_dir: str = throughput("data/cache")  # the tower's features and the predicted records
        device: str = throughput("cpu")  # "cpu" or "cuda"

    def __init__(self, args=None, loaded=None):
        super().__init__(args)
        from inputs.checkpoint import CheckpointError, load_entity_checkpoint
        from inputs.entity_records import locate_perception

        if loaded is None:
            if not self.args.ckpt:
                raise ValueError("crossview needs --model-arg ckpt=PATH (a checkpoint from python train.py)")
            if not Path(self.args.ckpt).is_file():
                raise ValueError(f"crossview: checkpoint not found: {self.args.ckpt}")
            try:
                loaded = load_entity_checkpoint(self.args.ckpt)
            except CheckpointError as err:  # a file problem, not a bad argument: exit 1, one line
                raise RunError(str(err)) from None
        model, vocab, config, trained_on = loaded
        self.model, self.vocab = model, vocab
        source = self.args.entities
        if source == MODEL:
            perception = config.get("perception", {})
            source = TRUTH if perception.get("entities") == TRUTH else perception.get("folder", "")
        self.perception: Path | None = None
        if source != TRUTH:
            try:
                self.perception = locate_perception(source, key="model_arg entities")
            except FileNotFoundError as err:
                raise ValueError(f"crossview: {err}") from None
        if self.args.entities == MODEL and self.perception is not None and trained_on:
            from inputs.entity_records import perception_hash
            now = perception_hash(self.perception)
            if now != trained_on:  # the shipped heads were replaced since this checkpoint was trained
                raise RunError(f"crossview: the perception heads at {self.perception} (sha256 {now[:12]}) are not "
                               f"those {self.args.ckpt} was trained on ({trained_on[:12]}); give "
                               "entities=<perception folder> to score it on other heads")
        if self.perception is None:
            self.name = CEILING_NAME  # every output of this run says it was told the truth
        self.device = torch.device(self.args.device)
        self.model.to(self.device).eval()
        self.records: dict[str, dict] | None = None

    @classmethod
    def from_loaded(cls, model, vocab, config: dict, perception_sha256: str | None = None,
                    cache_dir: str = "data/cache", device: str = "cpu") -> "CrossViewAdapter":
        """Wrap the in-memory reasoner of ``python train.py`` (its vocabulary, run config and the
        hash of the heads it was trained on)."""
        return cls(cls.Args(ckpt="<in memory>", cache_dir=cache_dir, device=device),
                   loaded=(model, vocab, config, perception_sha256))

    @property
    def is_ceiling(self) -> bool:
        return self.perception is None

    def provenance(self) -> dict:
        from common.provenance import file_sha256
        from inputs.entity_records import perception_hash
        ckpt = Path(self.args.ckpt)
        weights = {"ckpt_sha256": file_sha256(ckpt)} if ckpt.is_file() else {}
        if self.perception is not None:
            weights["perception"] = str(self.perception)
            weights["perception_sha256"] = perception_hash(self.perception)
        return {"device": str(self.device), "weights": weights or None,
                "entities": "truth (entity ceiling)" if self.is_ceiling else "predicted"}

    def prepare(self, benchmark: Benchmark) -> None:
        """Read (or predict and cache) the split's entity records: scene id -> image -> records."""
        from inputs.entity_records import split_records
        root = Path(benchmark.root)
        try:
            self.records = split_records(root.parent, root.name, self.perception, self.args.cache_dir,
                                         bench=benchmark, progress=False)
        except FileNotFoundError as err:
            raise RunError(f"crossview: {' '.join(str(err).split())}") from None

    @torch.no_grad()
    def generate(self, requests: list[Request]) -> list[Response]:
        from inputs.entity_batch import build_entity_item, build_text_item, collate_entities, image_stem
        if self.records is None:
            raise RuntimeError("crossview: prepare(benchmark) must run before generate")
        responses: list[Response | None] = [None] * len(requests)
        groups: dict[int, list[int]] = {}  # clips and still images apart: padding costs all pairs
        items: dict[int, dict] = {}
        for i, req in enumerate(requests):
            sample = req.sample  # options as asked (rotated under --circular)
            images = self.records.get(sample.scene)
            if images is None:
                raise RunError(f"crossview: sample {sample.id}: no entity records for scene {sample.scene!r}")
            views = [v.view_id for v in req.views]
            if not any(images.get(f.image, images.get(image_stem(f.image))) for v in views
                       for f in sample.view(v).frames):
                # perception found nothing in the views shown: no answer, scored as a failed one
                responses[i] = Response(text="", meta={"error": "no entity in the views shown"})
                continue
            items[i] = {**build_entity_item(sample, views, images, self.vocab), **build_text_item(sample, self.vocab)}
            groups.setdefault(max(len(v.image_paths) for v in req.views), []).append(i)
        for indices in groups.values():
            batch = {k: v.to(self.device) for k, v in collate_entities([items[i] for i in indices]).items()}
            logits = self.model(batch)["option_logits"].float().cpu()
            for row, i in enumerate(indices):
                responses[i] = Response(scores=logits[row, :len(requests[i].sample.options)].tolist())
        return responses
