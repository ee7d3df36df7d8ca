"""The unified zero-shot prompt: one declared template, snapshot-tested (tests/snapshots/).

The prompt holds one ``<image>`` placeholder per frame, in the order of
``Request.image_paths``; an adapter for an MLLM swaps each placeholder for its own image
token (or splits the text on it for a chat template). Views are named "View 1..N" by their
position in the seeded order, never by view id, so an id cannot leak which view is V_GT.

Changing the template changes every zero-shot number: the template's sha256 is part of the
run manifest, so a run with another template never mixes with an old one. The prompt is part
of the protocol, so it lives in bench/: the evaluator asks it, the harness exports write it.
"""
from __future__ import annotations

import hashlib

from bench.constants import LETTERS
from bench.format import Sample, View

IMAGE_TOKEN = "<image>"

# The closing lines: the question, its options and the instruction. A text-only (blind)
# model is asked these alone.
QUESTION_TEMPLATE = """\
Question: {question}
Options:
{options}
Answer with the option's letter from the given choices directly."""
PROMPT_TEMPLATE = "{views}\n{scene_note}\n" + QUESTION_TEMPLATE

SCENE_NOTE_ONE = "The view above shows the scene from one camera{time_note}."
SCENE_NOTE_MANY = ("The {n_views} views above show the same scene from different cameras{time_note}, "
                   "given in an arbitrary order.")

# Used by a fallback extractor (any adapter) when the rules cannot read a model's answer.
EXTRACT_TEMPLATE = """\
A model answered a multiple-choice question. Which option did it choose?
Question: {question}
Options:
{options}
Model's answer: {response}
Reply with the option's letter only, or "X" if the answer matches no option."""


def format_options(options: list[str]) -> str:
    return "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(options))


def format_views(views: list[View]) -> str:
    """One line per view; a multi-frame view lists its frames with their times."""
    lines = []
    for pos, view in enumerate(views, 1):
        if len(view.frames) == 1:
            lines.append(f"View {pos}: {IMAGE_TOKEN}")
        else:
            frames = " ".join(f"[t={f.t:g}s] {IMAGE_TOKEN}" for f in view.frames)
            lines.append(f"View {pos} ({len(view.frames)} frames): {frames}")
    return "\n".join(lines)


def build_prompt(sample: Sample, views: list[View]) -> str:
    """The zero-shot prompt for ``sample`` shown with ``views`` (already in presentation order)."""
    temporal = any(len(v.frames) > 1 for v in views)
    if len(views) == 1:
        note = SCENE_NOTE_ONE.format(time_note=", over time" if temporal else "")
    else:
        note = SCENE_NOTE_MANY.format(n_views=len(views), time_note=", recorded at the same times" if temporal else "")
    return PROMPT_TEMPLATE.format(
        views=format_views(views),
        scene_note=note,
        question=sample.question.strip(),
        options=format_options(sample.options),
    )


def build_question_prompt(question: str, options: list[str]) -> str:
    """The prompt's closing lines alone (question, options, instruction): what a blind model reads."""
    return QUESTION_TEMPLATE.format(question=question.strip(), options=format_options(options))


def build_extract_prompt(sample: Sample, response: str) -> str:
    """The prompt a fallback extractor answers to map free text to a letter."""
    return EXTRACT_TEMPLATE.format(question=sample.question.strip(), options=format_options(sample.options),
                                   response=response.strip())


def template_fingerprint() -> str:
    """sha256 (first 12 hex digits) of both templates; stored in the run manifest."""
    return hashlib.sha256("\0".join((PROMPT_TEMPLATE, SCENE_NOTE_ONE, SCENE_NOTE_MANY, EXTRACT_TEMPLATE)).encode()).hexdigest()[:12]
