"""Qwen2-VL and Qwen2.5-VL from a local folder: ``--model qwen2_vl --model-arg path=DIR``.

The model class comes from the folder's config.json (transformers' Auto classes), so one
adapter serves both generations; ``qwen2_5_vl`` is the same adapter under its own name so run
manifests say which family was evaluated. Qwen's processor re-sizes every frame to a multiple
of patch x merge (28 px) inside [min_pixels, max_pixels]; we pre-round to that multiple and
widen the bounds to the policy's size, so ``resolution=fixed:1920x1080`` really feeds ~1080p
frames instead of being clamped to the processor's default ceiling (~1 MP).
"""
from __future__ import annotations

from typing import Any

from eval.adapters.hf_common import HFVisionLanguageAdapter
from eval.adapters.registry import register_model


@register_model("qwen2_vl")
class Qwen2VL(HFVisionLanguageAdapter):
    """Qwen2-VL / Qwen2.5-VL (transformers, local weights), multi-image chat, greedy."""

    def size_multiple(self) -> int:
        if self.processor is None:
            return 28
        ip = self.processor.image_processor
        return int(ip.patch_size) * int(ip.merge_size)

    def processor_kwargs(self, sizes: list[tuple[int, int]]) -> dict[str, Any]:
        if self.policy.kind == "native" or not sizes:
            return {}  # the processor's own bounds decide, as in the model card
        pixels = [w * h for w, h in sizes]
        return {"images_kwargs": {"size": {"shortest_edge": min(pixels), "longest_edge": max(pixels)}}}

    def processed_sizes(self, inputs: Any) -> list[list[int]] | None:
        grid = inputs.get("image_grid_thw")
        if grid is None:
            return None
        patch = int(self.processor.image_processor.patch_size)
        return [[int(w) * patch, int(h) * patch] for _, h, w in grid.tolist()]


@register_model("qwen2_5_vl")
class Qwen25VL(Qwen2VL):
    """Qwen2.5-VL (same adapter as qwen2_vl; the name is kept in the run manifest)."""
