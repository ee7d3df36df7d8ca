"""Typed configuration of the frozen image tower (``BackboneConfig``), which the perception heads
read and the feature cache keys its entries by; the entity reasoner's own config is
``model.entity_reasoner.EntityReasonerConfig``, the perception heads' ``model.perception.PerceptionConfig``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Optional

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass
class BackboneConfig:
    """Frozen open_clip image tower; applied by the feature cache, read by the perception heads.

    Default: the in-domain CLIP tower shipped in checkpoints/backbone/synthclip-cnn16, a
    convolutional image tower (timm's cs3darknet_focus_s through open_clip's timm path,
    trained from scratch) read at its stride-16 stage (patch_layer 3: 256 channels, a 10x10
    grid at 160 px, one cell = 22 px of a 224-px render; its MODEL_CARD.md,
    configs/backbone/synthclip-cnn16.yaml).
    """

    RANGES: ClassVar[dict] = {"embed_dim": ">= 0", "image_size": ">= 1", "pool_grid": ">= 1", "std": "> 0"}

    arch: str = "synthclip-cnn16"  # open_clip model name (a label when vision_cfg or a local folder is given)
    vision_cfg: Optional[dict[str, Any]] = None  # custom open_clip CLIPVisionCfg dict (tests), random init
    embed_dim: int = 0  # pooled width for a custom vision_cfg (0: vision width)
    pretrained: Optional[str] = "checkpoints/backbone/synthclip-cnn16"  # local open_clip folder
    #   (relative: to the working directory, then the repository root), open_clip tag, local
    #   checkpoint path, or None (random weights, warns)
    image_size: int = 160  # square input side; images are resized (no crop) to it. A ViT folder's
    #   own input size (its position embeddings are fixed); a CNN runs at any size (the perception's
    #   feature pyramid reads the renders' native 224 px)
    patch_layer: int = 3  # level whose tokens are returned (model.backbone.tower_levels: a ViT's
    #   block, a CNN's stage); the shipped tower's stride-16 stage, the tokens its auxiliary heads
    #   were trained on (a pretrained ViT: -1, its last block; a random tower: an early block)
    normalize_patches: bool = True  # apply the tower's final LayerNorm to the patch tokens
    pooled_source: Literal["clip", "patch_mean"] = "clip"  # "clip": the tower's projected
    #   image-text embedding (full forward; the shipped tower's knows the caption: people,
    #   colours, postures); "patch_mean": stop after patch_layer and average its tokens (much
    #   cheaper for early layers)
    pool_grid: Optional[int] = None  # adaptive-average-pool the patch grid to g x g (smaller cache)
    init_seed: int = 0  # seed for random init, so un-pretrained features are reproducible
    mean: tuple[float, float, float] = OPENAI_CLIP_MEAN  # per-channel normalisation of the tower
    std: tuple[float, float, float] = OPENAI_CLIP_STD  # per-channel normalisation of the tower


def tiny_backbone_config() -> BackboneConfig:
    """A 2-block, 16-wide random ViT on 32-px images (4x4 grid of 8-px patches) for tests."""
    return BackboneConfig(
        arch="tiny-vit", pretrained=None, image_size=32, embed_dim=16, patch_layer=-2,
        vision_cfg=dict(image_size=32, patch_size=8, width=16, layers=2, head_width=8),
    )


def tiny_cnn_backbone_config(image_size: int = 64) -> BackboneConfig:
    """A random timm ``test_resnet`` CNN (levels 1, 2, 3: stride 4, 8, 16 with 32, 48, 192 channels) for
    tests of the perception's feature pyramid; like the shipped CNN it runs at any input size."""
    return BackboneConfig(
        arch="tiny-cnn", pretrained=None, image_size=image_size, embed_dim=16, patch_layer=3,
        vision_cfg=dict(timm_model_name="test_resnet", timm_model_pretrained=False, timm_pool="avg",
                        timm_proj="linear", image_size=image_size),
    )
