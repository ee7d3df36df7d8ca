"""Our trained model as one more adapter: ``--model crossview --model-arg ckpt=PATH``.

It scores every option directly (no text, no parsing) and reads the images through the same
feature cache that training filled, so evaluation never re-encodes an image it has seen. The
checkpoint, the cache, the tokenizer and the batches all come from inputs/, the pipeline
training uses too: scoring a checkpoint imports neither training/ nor Lightning.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from bench.format import Benchmark
from eval.adapters.base import ModelAdapter, Request, Response, throughput
from eval.adapters.registry import register_model
from eval.errors import RunError


@register_model("crossview")
class CrossViewAdapter(ModelAdapter):
    """The geometry-aware cross-view model (model/) from a checkpoint of python train.py."""

    @dataclass
    class Args:
        ckpt: str = ""  # a checkpoint written by python train.py (last.ckpt / best.ckpt)
        cache_dir: str = throughput("data/cache")  # backbone feature cache
        device: str = throughput("cpu")  # "cpu" or "cuda"

    def __init__(self, args=None, loaded=None):
        super().__init__(args)
        # Imported here so the evaluator's other adapters never pull in torch models.
        from inputs.backbone import build_components
        from inputs.checkpoint import CheckpointError, load_model
        from inputs.features import FeatureCache

        if loaded is None:
            if not self.args.ckpt:
                raise ValueError("crossview needs --model-arg ckpt=PATH (a checkpoint from python train.py)")
            if not Path(self.args.ckpt).is_file():
                raise ValueError(f"crossview: checkpoint not found: {self.args.ckpt}")
            try:
                model, model_cfg = load_model(self.args.ckpt)
            except CheckpointError as err:  # a file problem, not a bad argument: exit 1, one line
                raise RunError(str(err)) from None
            backbone, tokenizer = build_components(model_cfg)  # the stored model.backbone.pretrained
            loaded = (model, FeatureCache(self.args.cache_dir, backbone), tokenizer)
        self.model, self.cache, self.tokenizer = loaded
        self.device = torch.device(self.args.device)
        self.model.to(self.device).eval()
        self.benchmark: Benchmark | None = None
        self.table = None

    @classmethod
    def from_loaded(cls, model, cache, tokenizer, device: str = "cpu") -> "CrossViewAdapter":
        """Wrap an in-memory ``model.CrossViewModel`` (the end of ``python train.py``) without
        reloading it."""
        return cls(cls.Args(ckpt="<in memory>", device=device), loaded=(model, cache, tokenizer))

    def provenance(self) -> dict:
        ckpt = Path(self.args.ckpt)
        weights = None
        if ckpt.is_file():  # the in-memory model of python train.py has no file of its own
            from common.provenance import file_sha256
            weights = {"ckpt_sha256": file_sha256(ckpt)}
        return {"device": str(self.device), "weights": weights, "backbone": self.cache.identity}

    def prepare(self, benchmark: Benchmark) -> None:
        from inputs.items import split_images
        self.benchmark = benchmark
        self.table = self.cache.table(split_images(benchmark), desc="encoding eval images")

    @torch.no_grad()
    def generate(self, requests: list[Request]) -> list[Response]:
        if self.benchmark is None or self.table is None:
            raise RuntimeError("crossview: prepare(benchmark) must run before generate")
        # Clips and still images are run apart: padding a batch to its longest clip would
        # make every still image cost as much as an 8-frame clip.
        groups: dict[int, list[int]] = {}
        for i, req in enumerate(requests):
            groups.setdefault(max(len(v.image_paths) for v in req.views), []).append(i)
        responses: list[Response | None] = [None] * len(requests)
        for indices in groups.values():
            for i, response in zip(indices, self._score([requests[i] for i in indices])):
                responses[i] = response
        return responses

    def _score(self, requests: list[Request]) -> list[Response]:
        from inputs.items import ViewSet, build_item, collate
        items = []
        for req in requests:
            sample = req.sample  # options as asked (rotated under --circular)
            text = self.tokenizer.encode(sample.question, sample.options)
            view_set = ViewSet(0, tuple(v.view_id for v in req.views), req.setting)
            items.append(build_item(sample, view_set, self.benchmark.root, self.table, text))
        batch = collate(items, self.table, self.tokenizer.pad_id)
        batch = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        out = self.model(batch)
        logits = out["option_logits"].float().cpu()
        evidence = out["evidence_logits"].float().cpu()
        responses = []
        for i, req in enumerate(requests):
            n = len(req.sample.options)
            relevance = {v.view_id: round(float(evidence[i, j, :len(v.image_paths)].max()), 4)
                         for j, v in enumerate(req.views)}
            responses.append(Response(scores=logits[i, :n].tolist(), meta={"evidence": relevance}))
        return responses
