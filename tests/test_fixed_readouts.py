"""The fixed read-outs (model/fixed_readouts.py) on hand-built scenes: the trajectory's two ends,
the body part that touches an object."""
from __future__ import annotations

import torch

from bench.entities import FIELDS
from inputs.entity_batch import CONTACT_WIDTH, WordVocab, collate_entities
from model.entity_reasoner import EntityReasoner, EntityReasonerConfig


# -- trajectory: the start and the end landmark each count -------------------------------------------------------

PATH_OPTIONS = ["from the red box to the blue ball", "from the blue ball to the red box",
                "from the red box to the green pole", "from the green pole to the blue ball"]


def _path_batch():
    """Two cameras, four frames: the person in the red shirt starts beside the red box and walks to
    the blue ball; a green pole stands aside. Every entity is seen in every image, feet on the floor."""
    import numpy as np

    from inputs.entity_batch import COLOUR_NAMES, OBJECT_KINDS
    from scripts.bench_reasoner import IMAGE_HW, entity_box, look_at
    question = "Where does the person in the red shirt walk?"
    vocab = WordVocab.build([question] + PATH_OPTIONS)
    names = list(FIELDS)
    person = {"shirt": COLOUR_NAMES.index("red") + 1}
    objects = [((-1.5, 0.0), "box", "red"), ((1.5, 0.0), "ball", "blue"), ((0.0, 1.8), "pole", "green")]
    walk = [(-1.25, 0.0), (-0.4, 0.2), (0.4, 0.2), (1.25, 0.0)]
    cams = [look_at(np.array([0.0, -5.0, 3.0]), np.zeros(3)), look_at(np.array([4.0, -4.0, 3.0]), np.zeros(3))]
    rows: dict[str, list] = {k: [] for k in ("fields", "contact", "kind", "box", "image_hw", "view", "frame", "time",
                                             "mark", "image_mark", "mark_role", "entity_id", "pointer")}
    for v, (K, R, t) in enumerate(cams):
        for f, xy in enumerate(walk):
            ents = [(xy, 0, person, 1.7)] + [(o_xy, 1, {"object_kind": OBJECT_KINDS.index(k) + 1,
                                                       "object_colour": COLOUR_NAMES.index(c) + 1}, 0.5)
                                             for o_xy, k, c in objects]
            for i, (at, kind, fields, height) in enumerate(ents):
                rows["fields"].append([fields.get(n, 0) for n in names])
                rows["contact"].append([0.0] * CONTACT_WIDTH)
                rows["box"].append(entity_box(K, R, t, at, height))
                rows["image_hw"].append(IMAGE_HW)
                for key, value in (("kind", kind), ("view", v), ("frame", f), ("time", 0.5 * f), ("mark", 0),
                                   ("image_mark", 0), ("mark_role", 0), ("entity_id", i), ("pointer", float(i == 0))):
                    rows[key].append(value)
    item = {k: torch.tensor(v, dtype=torch.float32 if k in ("contact", "box", "image_hw", "time", "pointer")
                            else torch.long) for k, v in rows.items()}
    for i, key in enumerate(("camera_K", "camera_R", "camera_t")):
        item[key] = torch.tensor(np.stack([c[i] for c in cams]), dtype=torch.float32)
    item["has_camera"] = torch.ones(len(cams), dtype=torch.bool)
    text = {"question": torch.tensor(vocab.encode(question, cls_token=True)),
            "options": [torch.tensor(vocab.encode(o, cls_token=True)) for o in PATH_OPTIONS], "answer": 0}
    batch = collate_entities([{**item, **text}])
    batch["pointer_override"] = batch["pointer"]
    return batch, vocab


def test_a_path_option_scores_its_start_and_its_end_apart():
    """The person starts at the red box and ends at the blue ball: with the gate on the trajectory read-out,
    "from the red box to the blue ball" wins over the same words in the other order (which the mean of
    an option's words cannot tell apart) and over a wrong end."""
    batch, vocab = _path_batch()
    margins = {}
    for to_word in (vocab.stoi["to"], 0):
        torch.manual_seed(0)
        model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2, to_word=to_word),
                               vocab.class_words()).eval()
        geo, known = model.floor_geometry(batch)
        assert known[batch["entity_mask"]].all()
        with torch.no_grad():
            model.readout_gate.weight.zero_()
            model.readout_gate.bias.fill_(-30.0)
            model.readout_gate.bias[model.trajectory_index] = 30.0
            model.tied_scale.fill_(20.0)
            logits = model(batch)["option_logits"][0]
        margins[to_word] = logits
    right = margins[vocab.stoi["to"]]
    assert int(right.argmax()) == 0 and float(right[0] - right[1:].max()) > 3.0
    learned_only = margins[0]  # the old read-out: one bag of start and end words, the same for both orders
    assert abs(float(learned_only[0] - learned_only[1])) < 0.2 * float(right[0] - right[1])


def test_the_touching_effector_overlaps_in_every_view():
    """The left hand touches the red box: it overlaps it in both cameras. The right foot passes in
    front of it in camera 0 only and is apart from it in camera 1: it does not touch it."""
    from inputs.entity_batch import COLOUR_NAMES, OBJECT_KINDS, contact_vector
    from bench.entities import CONTACT_KEYS
    batch, vocab = _path_batch()
    box = (OBJECT_KINDS.index("box"), COLOUR_NAMES.index("red"))
    hand_l, foot_r = CONTACT_KEYS.index("hand_l"), CONTACT_KEYS.index("foot_r")
    person = (batch["kind"] == 0) & batch["entity_mask"]
    for e in torch.nonzero(person[0]).flatten().tolist():
        overlap = int(batch["view"][0, e]) == 0
        batch["contact"][0, e] = torch.tensor(contact_vector([[hand_l, *box, 1], [foot_r, *box, int(overlap)]]))
    red_box = batch["fields"][0, :, list(FIELDS).index("object_colour")] == COLOUR_NAMES.index("red") + 1
    p = (person[0] | red_box).float().unsqueeze(0)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2), vocab.class_words())
    touch = model.touching_effector(batch, p, p * person)[0]
    assert int(touch.argmax()) == hand_l and float(touch[hand_l]) > 0
    assert float(touch[foot_r]) == 0.0 and float(touch.sum()) == float(touch[hand_l])


def test_path_words_split_an_option_at_its_first_to():
    vocab = WordVocab.build(PATH_OPTIONS)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2, to_word=vocab.stoi["to"]),
                           vocab.class_words())
    words = torch.tensor([[vocab.stoi[w] for w in "from the red box to the blue ball".split()],
                          [vocab.stoi[w] for w in ["red"] + ["to"] + [str(k) for k in range(6)]],
                          [vocab.stoi["red"], vocab.stoi["to"], 0, 0, 0, 0, 0, 0],
                          [vocab.stoi[str(k)] for k in range(8)]])
    start, end, both = model.path_words(words)
    assert both.tolist() == [True, True, False, False]  # "red to" has no end; no "to" at all: not a path
    with torch.no_grad():
        torch.testing.assert_close(start[0], model._phrase(words[0, :4]))
        torch.testing.assert_close(end[0], model._phrase(words[0, 5:]))
