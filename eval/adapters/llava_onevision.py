"""LLaVA-OneVision from a local folder: ``--model llava_onevision --model-arg path=DIR``.

With several images per query the processor switches to OneVision's multi-image mode (each
image is one base crop at the vision tower's size, no AnyRes tiles), so a resolution policy
changes what the model sees mainly for single-image queries; ``Response.meta`` logs the
image tokens actually spent either way.
"""
from __future__ import annotations

from eval.adapters.hf_common import HFVisionLanguageAdapter
from eval.adapters.registry import register_model


@register_model("llava_onevision")
class LlavaOneVision(HFVisionLanguageAdapter):
    """LLaVA-OneVision (transformers, local weights), multi-image chat, greedy."""
