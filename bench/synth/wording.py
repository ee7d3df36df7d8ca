"""The question templates: the primary wording of every task and a paraphrase of each.

The primary templates live beside their proposers (``tasks_mvn``, ``tasks_svs``,
``tasks_temporal``: ``QUESTIONS``); ``PARAPHRASES`` says the same with other words and, where
natural, another order, with the same slots ({obj}, {side}, {shirt}), so the same options
answer it. Proposers always write the primary wording (the single-view oracle's tie-break key
and the duplicate check read it); ``phrase`` rewrites a verified question into the config's
``question_template``, so a paraphrased benchmark differs from the primary one of the same
config and seed in its question texts alone.
"""
from __future__ import annotations

import re

from bench.synth import tasks_mvn, tasks_svs, tasks_temporal

PRIMARY: dict[str, str] = {**tasks_mvn.QUESTIONS, **tasks_svs.QUESTIONS, **tasks_temporal.QUESTIONS}

# Mark labels stay words of their own ("labelled 1"): a reader links a mark to the text by its label.
PARAPHRASES: dict[str, str] = {
    "dedup_count": "Counting every person only once, how many people are there in the scene altogether?",
    "identity_match": "Another image shows the person labelled 1 again, under a different label. "
                      "Which label is it?",
    "person_object_contact": "The person labelled 1 is in contact with which object?",
    "limb_contact": "With which part of their body does the person labelled 1 touch the {obj}?",
    "limb_occlusion": "With their {side} arm, what is the person labelled 1 doing?",
    "action_count": "Among everyone in the scene, how many people are holding one or both hands up?",
    "attribute": "The person in contact with the {obj} wears a shirt of which colour?",
    "relation": "Of all the objects, which one stands closest to the person labelled 1?",
    "count_in_view": "In the image framed and labelled 1, how many people are visible?",
    "trajectory": "The person wearing the {shirt} shirt walks from where to where?",
    "repetition_count": "The person wearing the {shirt} shirt jumps how many times?",
    "motion_recognition": "Which sequence of actions does the person wearing the {shirt} shirt perform?",
    "limb_repetition_count": "The person wearing the {shirt} shirt waves their {side} hand how many times?",
    "limb_action_order": "Which hand action comes first for the person wearing the {shirt} shirt?",
    "limb_contact_over_time": "With their {side} hand, the person wearing the {shirt} shirt touches which object?",
}
TEMPLATES = {"primary": PRIMARY, "paraphrase": PARAPHRASES}


def _pattern(template: str) -> re.Pattern:
    """A regex that reads the slots back out of a question written from ``template``."""
    parts = re.split(r"\{(\w+)\}", template)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)))


_PRIMARY_PATTERNS = {task: _pattern(t) for task, t in PRIMARY.items()}


def slots(task: str, question: str) -> dict[str, str]:
    """The slot values ({obj}, {side}, {shirt}) of a primary-worded question of ``task``."""
    match = _PRIMARY_PATTERNS[task].fullmatch(question)
    if match is None:
        raise ValueError(f"{task}: {question!r} is not written from its primary template {PRIMARY[task]!r}")
    return match.groupdict()


def phrase(task: str, question: str, template: str) -> str:
    """``question`` (primary wording of ``task``) in the wording ``template`` names."""
    if template == "primary":
        return question
    return TEMPLATES[template][task].format(**slots(task, question))
