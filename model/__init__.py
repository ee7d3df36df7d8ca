"""Cross-view reasoning model: pure nn.Modules over cached backbone features (no file I/O)."""
from model.backbone import FrozenClipBackbone, preprocess_constants
from model.config import (BackboneConfig, CameraConfig, EntityConfig, EvidenceConfig,
                          FusionConfig, LanguageHeadConfig, ModelConfig,
                          tiny_backbone_config, tiny_model_config)
from model.build import build_model
from model.crossview import CrossViewModel
from model.language_head import load_causal_lm

__all__ = [
    "BackboneConfig", "CameraConfig", "EntityConfig", "EvidenceConfig", "FusionConfig",
    "LanguageHeadConfig", "ModelConfig", "tiny_backbone_config",
    "tiny_model_config", "CrossViewModel", "build_model", "FrozenClipBackbone",
    "preprocess_constants", "load_causal_lm",
]
