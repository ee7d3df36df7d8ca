"""The answer parser on a corpus of realistic MLLM answers (tests/data/parser_corpus.jsonl).

Each line: ``id``, ``group`` (the pattern it exercises), ``question`` (for a fallback extractor's
prompt; the rules never read it), ``options`` (as shown to the model),
``expected`` (the letter a careful reader takes, or null when the answer chose nothing) and
``text`` (the answer). Every case must pass: a clear answer is read, and no letter is invented
for one that lists candidates, hedges, refuses, says N/A or names image labels.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench.constants import LETTERS
from eval.parser import parse_answer

CORPUS = Path(__file__).parent / "data" / "parser_corpus.jsonl"
# The patterns of issue 15 plus the prompt shapes the benchmark uses; each needs >= 10 cases.
GROUPS = {
    "marker_list",          # a marker followed by a list of letters or options
    "na",                   # "N/A" / "(N/A)"
    "section_header",       # "Let's analyze each option:" and other headers
    "hedge",                # a hedge with a tentative mention
    "article_option",       # "point A appears ..." with options Point A / Point B
    "image_labels",         # letters that label images, not options
    "aside_vs_choice",      # a stray "(A)" in an aside vs "I would select Point C"
    "marker_variant",       # the final choice without the exact marker form
    "option_text_short",    # the option's text in a short answer
    "option_text_closing",  # the option's text in the closing sentence of a long answer
    "discussed_concluded",  # several letters discussed, one concluded
    "nota",                 # CVBench's "None of the above" option
    "five_options",         # 5-option prompts (E is a letter)
    "numeric_options",      # counting options that are numbers
    "letter_options",       # options that are letters or marks themselves
    "non_english",          # answers in other languages
    "refusal",              # refuses or says nothing about the options
    "equal_candidates",     # several candidates as equals
    "short_forms",          # the forms a model asked for a letter usually gives
    # issue 47: what the answer states, on answers shaped like real ones
    "contrastive_claim",    # the choice stated first, the rejected options contrasted after it
    "subject_letter",       # options "A is closer" / "B is closer" stated in words ("point A appears closer")
    "foreign_words",        # option words and answer markers in other languages, full-width letters
    "ordinal_images",       # "image (D)" when the options are the first ... fourth image in order
    "yes_no_words",         # "No, ..." answers; "no car" is no answer
    "claim_and_conclusion", # descriptions then a conclusion; a judgement and a contrary conclusion
    "per_option_verdicts",  # one "the answer is (X)" per option, or a contrary conclusion after the answer
    "compared_options",     # what an option is compared with ("than", "compared to", "unlike") is not chosen
    "refusal_turn",         # "I'm sorry, but ...", "none of these images", a doubt conceded on the way
    "mixed_styles",         # a batch in the styles of the held-out models, written after the rules above
}
METHODS = {"letter", "marker", "choice", "leading", "claim", "closing", "label", "option_text", "mention", "failed"}


def _load() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


CASES = _load()


def test_corpus_is_well_formed():
    assert len(CASES) >= 300
    assert len({c["id"] for c in CASES}) == len(CASES)
    for c in CASES:
        assert set(c) == {"id", "group", "question", "options", "expected", "text"}, c["id"]
        assert c["group"] in GROUPS, c["id"]
        assert isinstance(c["text"], str) and len(c["options"]) >= 2, c["id"]
        assert all(isinstance(o, str) and o for o in c["options"]), c["id"]
        assert c["expected"] is None or c["expected"] in LETTERS[: len(c["options"])], c["id"]
    counts = Counter(c["group"] for c in CASES)
    assert set(counts) == GROUPS and min(counts.values()) >= 10, counts
    # Both sides are tested: answers to read and answers that chose nothing.
    assert sum(c["expected"] is None for c in CASES) >= 100
    assert sum(c["expected"] is not None for c in CASES) >= 200


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_corpus_case(case):
    result = parse_answer(case["text"], case["options"])
    assert result.letter == case["expected"], (case["text"], case["options"], result)
    assert result.failed == (case["expected"] is None) and result.method in METHODS


def test_every_rule_reads_part_of_the_corpus():
    methods = Counter(parse_answer(c["text"], c["options"]).method for c in CASES)
    assert set(methods) == METHODS, methods


# The decision order as eval/README.md shows it: one example per rule, in order.
COUNT = ["2", "3", "4", "5"]
POINTS = ["Point A", "Point B", "Point C", "Point D"]
PICTURES = ["picture A", "picture B", "picture C", "picture D"]
LIMBS = ["left hand", "right hand", "left foot", "right foot"]
OBJECTS = ["ball", "box", "pole", "chair", "None of the above"]
BOXES = ["Box A", "Box B"]
DEPTH = ["A is closer", "B is closer"]
IMAGES = ["the second image", "the third image"]
README_EXAMPLES = [
    ("(B)", COUNT, "B", "letter"),
    ("Right hand", LIMBS, "B", "option_text"),
    ("左", ["left", "right"], "A", "option_text"),
    ("Option A shows a plain wall. Option B shows a door handle. So, the answer is:\n\n**(C) picture C**",
     PICTURES, "C", "marker"),
    ("**Option C** is the most likely correct answer.", PICTURES, "C", "marker"),
    ("I would select Point C (the circle (A) in the first image is on the leg).", POINTS, "C", "choice"),
    ("The correct choice (A, B, C, or D) cannot be determined from the images.", POINTS, None, "failed"),
    ("The correct answer is:\n\n(A) picture A\n(B) picture B\n(C) picture C\n(D) picture D", PICTURES, None, "failed"),
    ("B. 3\nThe person in view 2 is the one in the red shirt from view 1.", COUNT, "B", "leading"),
    ("It is not possible to tell from this image. While point B appears larger, it may be perspective.",
     POINTS, None, "failed"),
    ("N/A", POINTS, None, "failed"),
    ("Box A fits the dog most closely. It touches the dog's outline. Box B, on the other hand, is much wider.",
     BOXES, "A", "claim"),
    ("Hard to tell at first, but after comparing the shadows, point A is closer.", POINTS, "A", "claim"),
    ("Point A is on the back wall. Objects on the table are in front of the wall. "
     "Therefore, point B is closer to the camera.", POINTS, "B", "closing"),
    ("Point A is on the table. Point B is on the far wall.", POINTS, None, "failed"),
    ("The third image (C) is most similar to the first image (A).", ["the second image", "the third image"],
     "B", "option_text"),
    ("The person touches the chair (option (D)), not the ball.", OBJECTS, "D", "label"),
    ("3 people, one of them only in view 2", COUNT, "B", "option_text"),
    ("I think it's B", COUNT, "B", "mention"),
    ("Judging by the sizes of the parked cars around it, point A, which is circled on the red car, appears to be closer "
     "to the camera than point B.", DEPTH, "A", "claim"),
    ("Point A lies on the roof, so the answer is (A). Point B lies on the door, so the answer is (B). Point C lies on "
     "the chimney, so the answer is (C).", POINTS, None, "failed"),
    ("Answer: A\n\nBox A covers half of the bus. Therefore, Box B more accurately encloses the bus.", BOXES, None,
     "failed"),
    ("Box A fits the dog most closely. It covers the head and the tail. Therefore, Box B is the better box.", BOXES,
     None, "failed"),
    ("The second image shows a harbour at night. The third image, on the other hand, shows a harbour at noon.",
     IMAGES, None, "failed"),
    ("the most similar image is (A) the third image", IMAGES, None, "failed"),
]


@pytest.mark.parametrize("text,options,letter,method", README_EXAMPLES)
def test_readme_examples(text, options, letter, method):
    result = parse_answer(text, options)
    assert (result.letter, result.method) == (letter, method), (text, result)
