"""InternVL from a local folder: ``--model internvl --model-arg path=DIR``.

transformers 5 has a native InternVL class (``model_type: internvl``: the "-hf" checkpoints
such as InternVL3-*-hf), which runs through the shared batched path with the processor's
dynamic tiling. The original OpenGVLab checkpoints (``model_type: internvl_chat``) ship their
own modelling code; they run only with ``--model-arg trust_remote_code=true`` (code from the
model folder is executed) through the checkpoint's ``chat()`` API, one query at a time, with
our tiling below (448-px tiles + thumbnail, ImageNet normalisation, as in the model card).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from eval.adapters.base import Request, Response
from eval.adapters.hf_common import HFVisionLanguageAdapter
from eval.adapters.registry import register_model
from eval.adapters.resolution import load_frames

NATIVE_MODEL_TYPES = ("internvl",)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def tile_grid(width: int, height: int, tile: int, max_tiles: int) -> tuple[int, int]:
    """(columns, rows) of ``tile``-px tiles covering a frame, at most ``max_tiles`` in all."""
    cols, rows = max(1, round(width / tile)), max(1, round(height / tile))
    while cols * rows > max_tiles:  # shrink the longer side first to keep the aspect ratio
        if cols >= rows:
            cols -= 1
        else:
            rows -= 1
    return cols, rows


@register_model("internvl")
class InternVL(HFVisionLanguageAdapter):
    """InternVL 2/2.5/3 (native transformers class; remote code only with trust_remote_code=true)."""

    @dataclass
    class Args(HFVisionLanguageAdapter.Args):
        trust_remote_code: bool = False  # allow a checkpoint's own Python code (original OpenGVLab format)
        max_tiles: int = 6  # remote-code path: 448-px tiles per frame (plus a thumbnail when > 1)

    def __init__(self, args=None):
        super().__init__(args)
        config = json.loads((Path(self.args.path) / "config.json").read_text())
        self.model_type = config.get("model_type", "")
        self.native = self.model_type in NATIVE_MODEL_TYPES
        if not self.native and not self.args.trust_remote_code:
            raise ValueError(f"path={self.args.path}: model_type {self.model_type!r} is not transformers' native "
                             "InternVL; use an '-hf' checkpoint or pass --model-arg trust_remote_code=true "
                             "(runs Python code from the model folder)")
        if self.args.max_tiles < 1:
            raise ValueError("max_tiles must be >= 1")
        self.trust_remote_code = self.args.trust_remote_code
        self.tokenizer = None

    def load(self) -> None:
        if self.native:
            return super().load()
        from transformers import AutoModel, AutoTokenizer
        device, dtype = self._device_and_dtype()
        self.tokenizer = AutoTokenizer.from_pretrained(self.args.path, trust_remote_code=True, local_files_only=True)
        placement = {"device_map": self.args.device_map} if self.args.device_map else {}
        self.model = AutoModel.from_pretrained(self.args.path, dtype=dtype, trust_remote_code=True,
                                               local_files_only=True, **placement)
        if not self.args.device_map:
            self.model.to(device)
        self.model.eval()

    def generate(self, requests: list[Request]) -> list[Response]:
        if self.native:
            return super().generate(requests)
        if self.model is None:
            self.load()
        return [self._chat(r) for r in requests]

    # ---- remote-code path -----------------------------------------------------------------
    def _tiles(self, frame, tile: int):
        """(n_tiles, 3, tile, tile) normalised tensor of one frame."""
        import torch
        import numpy as np
        cols, rows = tile_grid(*frame.size, tile, self.args.max_tiles)
        grid = frame.resize((cols * tile, rows * tile))
        crops = [grid.crop((c * tile, r * tile, (c + 1) * tile, (r + 1) * tile)) for r in range(rows) for c in range(cols)]
        if len(crops) > 1:
            crops.append(frame.resize((tile, tile)))  # the global thumbnail InternVL is trained with
        arr = np.stack([np.asarray(c, dtype=np.float32) / 255.0 for c in crops])
        arr = (arr - np.array(IMAGENET_MEAN, np.float32)) / np.array(IMAGENET_STD, np.float32)
        return torch.from_numpy(arr).permute(0, 3, 1, 2)

    def _chat(self, request: Request) -> Response:
        import torch
        frames, sizes = load_frames(request, self.policy)
        tile = int(getattr(self.model.config, "force_image_size", 0) or self.model.config.vision_config.image_size)
        per_frame = [self._tiles(f, tile) for f in frames]
        n_tiles = [int(t.shape[0]) for t in per_frame]
        pixels = torch.cat(per_frame).to(self.model.device, self.model.dtype) if per_frame else None
        gen = dict(max_new_tokens=self.args.max_new_tokens, do_sample=False)
        with torch.inference_mode():
            text = self.model.chat(self.tokenizer, pixels, request.prompt, gen,
                                   num_patches_list=n_tiles if per_frame else None)
        per_tile = int(self.model.num_image_token)
        tokens = [n * per_tile for n in n_tiles]
        by_view, i = [], 0
        for v in request.views:
            by_view.append(sum(tokens[i:i + len(v.image_paths)]))
            i += len(v.image_paths)
        meta = {"resolution": str(self.policy), "image_sizes": [list(s) for s in sizes], "tiles": n_tiles,
                "image_tokens": sum(tokens), "image_tokens_per_view": by_view, "remote_code": True}
        return Response(text=str(text).strip(), meta=meta)

