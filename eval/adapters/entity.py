"""The entity reasoner as one more adapter: ``--model entity --model-arg ckpt=PATH``.

It reads per-image entity records instead of pixels, and scores every option directly (no text,
no parsing). Where the records come from is an argument:

- ``entities=truth`` (default): the records the generator wrote beside the benchmark
  (``<bench>/labels/<split>.jsonl.gz``), every person and object as its view shows it. This is the
  **entity ceiling** (``python -m scripts.probe_entity_ceiling``): an upper bound told the truth on
  purpose, never a model's score.
- ``entities=DIR`` with ``DIR/perception.safetensors``: the entity model end to end. The perception
  heads of ``python -m scripts.fit_perception --out DIR`` predict every image's entities from the
  frozen tower's cached features (``inputs.perception``), on any benchmark.
- ``entities=DIR`` with ``DIR/<split>.jsonl.gz``: predicted records written earlier (the ``records/``
  folder of ``python -m scripts.fit_perception``), looked up by the split folder's name.

The checkpoint is the ``entity_reasoner.pt`` that ``training.entity_fit`` writes (weights, word
vocabulary and model config), loaded with ``weights_only=True``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from bench.format import Benchmark
from eval.adapters.base import ModelAdapter, Request, Response, throughput
from eval.adapters.registry import register_model
from eval.errors import RunError

TRUTH = "truth"


@register_model("entity")
class EntityAdapter(ModelAdapter):
    """The entity reasoner (model/entity_reasoner.py) on true or predicted entity records."""

    @dataclass
    class Args:
        ckpt: str = ""  # entity_reasoner.pt from python -m scripts.probe_entity_ceiling (or training.entity_fit)
        entities: str = TRUTH  # "truth" (the entity ceiling), a perception folder, or a folder of <split>.jsonl.gz
        cache_dir: str = throughput("data/cache")  # the tower's feature caches (a perception folder only)
        device: str = throughput("cpu")

    def __init__(self, args=None):
        super().__init__(args)
        from dataclasses import fields

        from inputs.entity_batch import WordVocab
        from model.entity_reasoner import EntityReasoner, EntityReasonerConfig

        if not self.args.ckpt:
            raise ValueError("entity needs --model-arg ckpt=PATH (an entity_reasoner.pt)")
        if not Path(self.args.ckpt).is_file():
            raise ValueError(f"entity: checkpoint not found: {self.args.ckpt}")
        if self.args.entities != TRUTH and not Path(self.args.entities).is_dir():
            raise ValueError(f"entity: entities={self.args.entities!r} is neither 'truth' nor a folder (perception "
                             "heads or predicted records)")
        try:
            ckpt = torch.load(self.args.ckpt, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - any unreadable file: one line, exit 1
            raise RunError(f"entity: {self.args.ckpt}: not an entity reasoner checkpoint (cannot be read: "
                           f"{' '.join(str(err).split())[:200]})") from None
        try:
            self.vocab = WordVocab(ckpt["vocab"])
            known = {f.name for f in fields(EntityReasonerConfig)}
            stored = ckpt.get("config", {})  # files written before the config was stored: the defaults
            unknown = sorted(set(stored) - known)
            if unknown:
                raise RunError(f"entity: {self.args.ckpt}: unknown model config keys {unknown}")
            cfg = EntityReasonerConfig(**{**stored, "vocab_size": len(self.vocab)})
            self.model = EntityReasoner(cfg, self.vocab.class_words())
            self.model.load_state_dict(ckpt["state_dict"])
        except RunError:
            raise
        except (KeyError, RuntimeError, TypeError, AttributeError, IndexError) as err:  # a file problem, not a bad argument: exit 1, one line
            raise RunError(f"entity: {self.args.ckpt}: not an entity reasoner checkpoint "
                           f"({' '.join(str(err).split())[:200]})") from None
        self.device = torch.device(self.args.device)
        self.model.to(self.device).eval()
        self.records: dict[str, dict] | None = None
        self.perception = None
        if self.args.entities != TRUTH and (Path(self.args.entities) / "perception.safetensors").is_file():
            from inputs.perception import level_caches, load_perception, read_settings
            try:
                backbone, fine_layer, heads_cfg = read_settings(self.args.entities)
                caches = level_caches(backbone, self.args.cache_dir, fine_layer)
                self.perception = (load_perception(self.args.entities, caches, heads_cfg), caches)
            except (FileNotFoundError, ValueError) as err:
                raise RunError(f"entity: {' '.join(str(err).split())}") from None

    def provenance(self) -> dict:
        from common.provenance import file_sha256
        weights = {"ckpt_sha256": file_sha256(self.args.ckpt)}
        if self.perception is not None:
            weights["perception_sha256"] = file_sha256(Path(self.args.entities) / "perception.safetensors")
            weights["backbone"] = self.perception[1].coarse.identity
        return {"device": str(self.device), "weights": weights, "entities": self.args.entities}

    def prepare(self, benchmark: Benchmark) -> None:
        """Read the split's entity records: scene id -> image (stem or path) -> records."""
        from inputs.entity_batch import load_entity_labels, load_predicted_records
        root = Path(benchmark.root)
        split = root.name
        try:
            if self.args.entities == TRUTH:  # the ceiling reads the truth of an evaluation split on purpose
                self.records = load_entity_labels(root.parent, split, allow_eval_splits=True)
            elif self.perception is not None:  # pixels -> entities, through the cached tower
                from inputs.perception import benchmark_images, predict_records
                heads, caches = self.perception
                pred = predict_records(heads, [p for p, _, _ in benchmark_images(benchmark)], caches)
                base = root.resolve()
                pred = {str(Path(p).relative_to(base)): recs for p, recs in pred.items()}
                self.records = {s.scene: pred for s in benchmark.samples}
            else:
                pred = load_predicted_records(Path(self.args.entities) / f"{split}.jsonl.gz")
                self.records = {s.scene: pred for s in benchmark.samples}
        except FileNotFoundError as err:
            raise RunError(f"entity: {err}") from None

    @torch.no_grad()
    def generate(self, requests: list[Request]) -> list[Response]:
        from inputs.entity_batch import build_entity_item, build_text_item, collate_entities, image_stem
        if self.records is None:
            raise RuntimeError("entity: prepare(benchmark) must run before generate")
        items, asked = [], []
        responses: list[Response | None] = [None] * len(requests)
        for i, req in enumerate(requests):
            sample = req.sample  # options as asked (rotated under --circular)
            images = self.records.get(sample.scene)
            if images is None:
                raise RunError(f"entity: sample {sample.id}: no entity records for scene {sample.scene!r}")
            views = [v.view_id for v in req.views]
            if not any(images.get(f.image, images.get(image_stem(f.image)))
                       for v in views for f in sample.view(v).frames):
                # perception found nothing in the views shown: no answer, scored as a failed one
                responses[i] = Response(text="", meta={"error": "no entity in the views shown"})
                continue
            items.append({**build_entity_item(sample, views, images, self.vocab),
                          **build_text_item(sample, self.vocab)})
            asked.append(i)
        if items:
            batch = {k: v.to(self.device) for k, v in collate_entities(items).items()}
            logits = self.model(batch)["option_logits"].float().cpu()
            for row, i in enumerate(asked):
                responses[i] = Response(scores=logits[row, :len(requests[i].sample.options)].tolist())
        return responses
