"""The task registry: name -> subset, CVBench granularity, proposer and verifier.

Task definitions are data: adding a task is one entry here plus its propose/consistent pair.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bench.synth import tasks_mvn as mvn
from bench.synth import tasks_svs as svs
from bench.synth import tasks_temporal as tmp


@dataclass(frozen=True)
class TaskDef:
    name: str
    subset: str          # SSMN: "MVN" or "SVS"
    granularity: str     # CVBench: "coarse" or "fine"
    propose: Callable    # (TaskContext) -> iterator of Candidate
    consistent: Callable  # (table, facts, views) -> set of still-possible values
    axis: str = "spatial"  # CVBench: "spatial" (one frame) or "temporal" (T frames per view)


TASKS: dict[str, TaskDef] = {t.name: t for t in [
    TaskDef("dedup_count", "MVN", "coarse", mvn.propose_dedup, mvn.consistent_dedup),
    TaskDef("identity_match", "MVN", "coarse", mvn.propose_identity, mvn.consistent_identity),
    TaskDef("person_object_contact", "MVN", "coarse", mvn.propose_object_contact, mvn.consistent_object_contact),
    TaskDef("limb_contact", "MVN", "fine", mvn.propose_limb_contact, mvn.consistent_limb_contact),
    TaskDef("limb_occlusion", "MVN", "fine", mvn.propose_limb_occlusion, mvn.consistent_limb_occlusion),
    TaskDef("action_count", "MVN", "fine", mvn.propose_action, mvn.consistent_action),
    TaskDef("attribute", "SVS", "fine", svs.propose_attribute, svs.consistent_attribute),
    TaskDef("relation", "SVS", "coarse", svs.propose_relation, svs.consistent_relation),
    TaskDef("count_in_view", "SVS", "coarse", svs.propose_count_in_view, svs.consistent_count_in_view),
    TaskDef("trajectory", "MVN", "coarse", tmp.propose_trajectory, tmp.consistent_trajectory, "temporal"),
    TaskDef("repetition_count", "MVN", "coarse", tmp.propose_repetition, tmp.consistent_count, "temporal"),
    TaskDef("motion_recognition", "MVN", "coarse", tmp.propose_motion, tmp.consistent_motion, "temporal"),
    TaskDef("limb_repetition_count", "MVN", "fine", tmp.propose_limb_repetition, tmp.consistent_count, "temporal"),
    TaskDef("limb_action_order", "MVN", "fine", tmp.propose_hand_order, tmp.consistent_hand_order, "temporal"),
    TaskDef("limb_contact_over_time", "MVN", "fine", tmp.propose_touch, tmp.consistent_touch, "temporal"),
]}
