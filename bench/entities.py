"""The entity record: what one image shows of each person and object, as the benchmark stores it.

The synthetic generator writes, beside the splits, ``<bench>/labels/<split>.jsonl.gz`` (bench/FORMAT.md,
"Entity records"): one line per scene, ``{"scene": scene id, "images": {image stem: [record, ...]}}``,
the image stem being the image file's name without extension ("cam2", "cam0_f03"). The generator
computes the records (``bench.synth.entity_labels.image_entities``); the entity ceiling reads them in
place of predicted ones, and perception learns to predict them (train split only). This module is
their schema, as data: it imports nothing from the generator.

A record is what perfect perception of *one image* could report, never more: a person's shirt only
when the torso is visible, an arm's state only when that arm is, the posture and whether the feet are
off the floor only when a shin or a foot is, and contact as the image's 2-D relation between a body
part and an object (``overlap`` is ambiguous in 2-D: it is not contact). No record links views.

Record (JSON, one per entity, sorted left to right by box centre, ties by ``id``)::

    {"id": int, "kind": "person" | "object", "box": [x0, y0, x1, y1],
     person: "frac", "shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "airborne", "contact"
     object: "object_kind", "object_colour"}

- ``id``: the renderer's person or object id, the same in every image of a scene. A *training label
  only* (the association head, the pointer); never an input. Predicted records carry -1.
- ``kind``: one of ``KINDS``.
- ``box``: the entity's visible pixels' box in pixels of the image, ``x1``/``y1`` exclusive.
- a categorical field (``FIELDS``; the ones of each kind in ``KIND_FIELDS``): the class index into
  ``CLASSES[field]``, or ``IGNORE`` (-1) where the view does not show it (``frac``, ``object_kind``
  and ``object_colour`` are always shown).

  ``frac``: the visible fraction (visible pixels / unoccluded pixels) binned by ``FRAC_BINS``;
  ``shirt``, ``trousers``: ``COLOUR_NAMES``; ``hat``: ``HAT_NAMES`` (0 = no hat); ``posture``:
  ``POSTURES``; ``arm_l``, ``arm_r``: ``ARM_CLASSES``; ``airborne``: 0 on the floor, 1 off it;
  ``object_kind``: ``OBJECT_KINDS``; ``object_colour``: ``COLOUR_NAMES``.
- ``contact`` (persons): ``[[effector, object kind, object colour, overlap], ...]``, one entry per
  (effector, object) pair whose relation the image shows: ``effector`` an index into
  ``CONTACT_KEYS`` (``EFFECTORS``, then "any": the whole body), the object's kind and colour as
  above, ``overlap`` 1 where the two overlap or touch in 2-D, 0 where they are apart. A pair the view
  cannot tell (one of the two hidden) has no entry.

``MARK_FACT_KEYS`` is the per-mark record of a static sample (``meta["mark_facts"]``): the same
classes, as the marked person's own view shows them (-1 where it does not), ``contact_kind`` being
0 for touching nothing and 1 + an ``OBJECT_KINDS`` index otherwise.
"""
from __future__ import annotations

KINDS = ("person", "object")
IGNORE = -1  # a label the view does not show (hidden torso, arm out of sight)

COLOUR_NAMES = ["red", "blue", "green", "yellow", "orange", "purple", "white", "pink", "black", "grey", "brown",
                "cyan"]  # the palette (bench.synth.primitives.COLOURS holds each name's RGB, in this order)
HAT_NAMES = ["none", "red", "yellow", "black", "white", "blue"]
POSTURES = ["standing", "walking", "jumping", "crouching", "sitting", "reaching", "foot_up"]
ARM_CLASSES = ["down", "side", "hip", "raised", "reaching", "waving"]
OBJECT_KINDS = ["box", "ball", "pole", "chair", "panel"]
FRAC_BINS = (0.25, 0.5, 0.8)  # visible fraction -> bin 0..3 (heavily hidden .. whole)
FRAC_NAMES = ["hidden", "partly", "mostly", "whole"]  # the bins of FRAC_BINS
AIRBORNE_NAMES = ["grounded", "airborne"]

EFFECTORS = ["hand_l", "hand_r", "foot_l", "foot_r", "head"]  # the body parts a contact names
CONTACT_KEYS = EFFECTORS + ["any"]  # a contact entry's effector index; "any": the whole body

CLASSES: dict[str, list[str]] = {
    "shirt": COLOUR_NAMES, "trousers": COLOUR_NAMES, "hat": HAT_NAMES, "posture": POSTURES,
    "arm_l": ARM_CLASSES, "arm_r": ARM_CLASSES, "airborne": AIRBORNE_NAMES, "frac": FRAC_NAMES,
    "object_kind": OBJECT_KINDS, "object_colour": COLOUR_NAMES}
"""The class names of each categorical field of a record, in field order (``FIELDS``)."""

FIELDS: dict[str, int] = {field: len(classes) for field, classes in CLASSES.items()}
"""Class count of each categorical field of a record (the perception heads' outputs), in order."""

KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "person": ("shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "airborne", "frac"),
    "object": ("object_kind", "object_colour")}
"""The categorical fields a record of each kind carries (``FIELDS`` order)."""

MARK_FACT_KEYS = ("shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "contact_kind")

# The words the benchmark's questions and options name an arm state and a body part with
# ("What is the person marked 1 doing with their left arm?" "raising it above the head").
ARM_TEXT = {"raised": "raising it above the head", "down": "letting it hang down",
            "side": "stretching it out to the side", "hip": "resting the hand on the hip",
            "reaching": "reaching out to an object"}
EFFECTOR_TEXT = {"hand_l": "left hand", "hand_r": "right hand", "foot_l": "left foot", "foot_r": "right foot",
                 "head": "head"}

assert len(FRAC_NAMES) == len(FRAC_BINS) + 1
assert [f for kind in KINDS for f in KIND_FIELDS[kind]] == list(FIELDS)
