"""The entity records' schema (bench/entities.py) is what the generator writes (bench/synth/entity_labels.py)."""
from __future__ import annotations

import pytest

from common.config import load_config
from bench import entities as E
from bench.synth.config import SynthConfig
from bench.synth.entity_labels import image_entities
from bench.synth.generate import build_scene, build_temporal_scene, scene_entities
from bench.synth.primitives import COLOURS

TINY = ["render.width=64", "render.height=64"]


def test_fields_are_in_their_fixed_order():
    """The perception heads and the labels files index fields and classes by position."""
    assert list(E.FIELDS) == ["shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "airborne", "frac",
                              "object_kind", "object_colour"]
    assert E.FIELDS == {f: len(c) for f, c in E.CLASSES.items()}
    assert E.FIELDS["frac"] == len(E.FRAC_BINS) + 1 and E.FIELDS["airborne"] == 2
    assert E.CONTACT_KEYS == ["hand_l", "hand_r", "foot_l", "foot_r", "head", "any"]
    assert E.IGNORE == -1 and E.KINDS == ("person", "object")
    assert list(COLOURS) == E.COLOUR_NAMES  # the renderer's palette is the schema's colours, in order


def test_the_model_knows_the_same_fields():
    """model/ imports no bench module: its copies of the kinds and fields must agree with the schema."""
    from model.perception import KINDS, OBJECT_FIELDS, PERSON_FIELDS
    assert tuple(KINDS) == E.KINDS
    assert set(PERSON_FIELDS) == set(E.KIND_FIELDS["person"]) and set(OBJECT_FIELDS) == set(E.KIND_FIELDS["object"])


def _check(scene, records: list[dict]) -> tuple[int, int]:
    persons = {p.pid: p for p in scene.persons}
    objects = {o.oid: o for o in scene.objects}
    n_person = n_object = 0
    for rec in records:
        fields = set(E.KIND_FIELDS[rec["kind"]])
        assert set(rec) == {"id", "kind", "box"} | fields | ({"contact"} if rec["kind"] == "person" else set())
        x0, y0, x1, y1 = rec["box"]
        assert 0 <= x0 < x1 and 0 <= y0 < y1
        for f in fields:
            assert E.IGNORE <= rec[f] < E.FIELDS[f], (f, rec[f])
        for f in fields & {"frac", "object_kind", "object_colour"}:  # always shown
            assert rec[f] != E.IGNORE, f
        if rec["kind"] == "object":  # the class names are the generator's: they name the scene's object
            n_object += 1
            obj = objects[rec["id"]]
            assert E.CLASSES["object_kind"][rec["object_kind"]] == obj.kind
            assert E.CLASSES["object_colour"][rec["object_colour"]] == obj.colour
            continue
        n_person += 1
        person = persons[rec["id"]]
        if rec["shirt"] != E.IGNORE:
            assert E.CLASSES["shirt"][rec["shirt"]] == person.shirt
        if rec["trousers"] != E.IGNORE:
            assert E.CLASSES["trousers"][rec["trousers"]] == person.trousers
        if rec["hat"] != E.IGNORE:
            assert E.CLASSES["hat"][rec["hat"]] == (person.hat or "none")
        for effector, kind, colour, overlap in rec["contact"]:
            assert 0 <= effector < len(E.CONTACT_KEYS) and overlap in (0, 1)
            assert (E.OBJECT_KINDS[kind], E.COLOUR_NAMES[colour]) in {(o.kind, o.colour) for o in scene.objects}
    centres = [r["box"][0] + r["box"][2] for r in records]
    assert centres == sorted(centres)  # left to right
    return n_person, n_object


@pytest.mark.parametrize("axis", ["spatial", "temporal"])
def test_generated_records_fit_the_schema(axis):
    cfg = load_config(SynthConfig, None, TINY)
    n_person = n_object = 0
    for idx in range(2 if axis == "spatial" else 1):
        if axis == "spatial":
            scene, _, obs, _ = build_scene(cfg, idx)
            images = [(o, 0.0) for o in obs.values()]
        else:
            scene, _, obs, _ = build_temporal_scene(cfg, idx)
            images = [(o, t) for os_ in obs.values() for o, t in zip(os_, scene.times)]
        for o, t in images:
            p, q = _check(scene, image_entities(scene, o, t))
            n_person, n_object = n_person + p, n_object + q
    assert n_person > 0 and n_object > 0


def test_scene_entities_takes_a_synthetic_scene_id():
    """(Its records equal the labels file's: tests/test_entity_reasoner.py.)"""
    with pytest.raises(ValueError, match="not a synthetic scene id"):
        scene_entities(load_config(SynthConfig, None, TINY), "x01")
