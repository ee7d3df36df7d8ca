"""The entity model's pure nn.Modules (no file I/O): the frozen tower's wrapper, the perception
heads and the entity reasoner; inputs/ builds them from files."""
from model.backbone import FrozenClipBackbone, preprocess_constants
from model.config import BackboneConfig, tiny_backbone_config
from model.entity_reasoner import EntityReasoner, EntityReasonerConfig
from model.perception import PerceptionConfig, PerceptionHeads

__all__ = ["BackboneConfig", "tiny_backbone_config", "FrozenClipBackbone", "preprocess_constants", "EntityReasoner",
           "EntityReasonerConfig", "PerceptionConfig", "PerceptionHeads"]
