"""The answer parser: the short forms, verbose and chain-of-thought answers, and refusals."""
from __future__ import annotations

import math

import pytest

from eval.parser import parse_answer, parse_scores

COUNT = ["2", "3", "4", "5"]  # option B is "3"
NOTA5 = ["2", "3", "4", "5", "None of the above"]
OBJECTS = ["ball", "box", "pole", "chair", "None of the above"]


@pytest.mark.parametrize("text", [
    "B", "(B)", "B.", "B)", "**B**", "`B`", "Answer: B", "The answer is (B).",
    "I choose option B because the person in view 2 is the same as in view 1.",
    "b", "answer: b", "the answer is (b)", "3 people", "three people", "3", " B \n",
    "[B]", "Option B", "**Answer:** B", "Answer: **B**", "B. 3", "B) 3", "B: 3 people are in the scene",
])
def test_short_forms_read_b(text):
    result = parse_answer(text, COUNT)
    assert (result.letter, result.failed) == ("B", False), text


def test_final_answer_after_long_reasoning_wins():
    text = ("Let me look at each view. View 1 shows two people, so option A looks plausible at first. "
            "View 2 shows a third person with a hat who is not visible in view 1. Option D would double count.\n"
            "So the total is three.\n\nAnswer: B")
    assert parse_answer(text, COUNT).letter == "B"
    assert parse_answer(text, COUNT).method == "marker"


@pytest.mark.parametrize("text", [
    "Based on the views, I cannot determine the answer.",
    "The answer...",
    "The answer is a bit unclear from these images.",
    "A person is standing near the pole.",
    "",
    "   ",
    "I am not sure.",
    "Both A and C seem possible.",
])
def test_refusals_fail_without_a_letter(text):
    result = parse_answer(text, COUNT)
    assert result.failed and result.letter is None and result.method == "failed", text


def test_valid_letters_come_from_the_sample():
    # "T" or "E" are never letters of a 4-option sample.
    assert parse_answer("The answer is E.", COUNT).failed
    assert parse_answer("E", COUNT).failed
    assert parse_answer("E", NOTA5).letter == "E"
    assert parse_answer("Based on this", ["x", "y"]).failed


def test_option_text_nota_and_longest_match():
    assert parse_answer("None of the above", NOTA5).letter == "E"
    assert parse_answer("none of the above.", NOTA5).letter == "E"
    assert parse_answer("The ball.", OBJECTS).letter == "A"
    assert parse_answer("The answer is the chair", OBJECTS).letter == "D"


# At least 25 realistic verbose answers (wording in the style of GPT-4o, Qwen-VL, InternVL,
# LLaVA and reasoning models), with the option letter a reader would take.
VERBOSE = [
    ("After comparing the four views, the person in the red shirt appears in both view 1 and view 3. "
     "Therefore, the correct answer is C.", COUNT, "C"),
    ("The correct option is (D) 5.", COUNT, "D"),
    ("Answer: (A) 2", COUNT, "A"),
    ("**Final Answer:** C", COUNT, "C"),
    ("Final answer: \\boxed{B}", COUNT, "B"),
    ("<think>View 1 has 2 people, view 2 has 2 people, one is shared... so 3.</think>\nB", COUNT, "B"),
    ("<think>Counting carefully. Option A would be the single-view count.</think>The answer is B.", COUNT, "B"),
    ("There are three distinct people in the scene.", COUNT, "B"),
    ("I would go with option C, since the hat is visible only from camera 2.", COUNT, "C"),
    ("Looking at view 2, the ball is closest to the person. So my answer is A.", OBJECTS, "A"),
    ("The box.", OBJECTS, "B"),
    ("It is the pole.", OBJECTS, "C"),
    ("The person is nearest to the chair, so the answer is (D).", OBJECTS, "D"),
    ("E. None of the above", NOTA5, "E"),
    ("None of the options match what I see, so: None of the above.", NOTA5, "E"),
    ("(C) 4 people", COUNT, "C"),
    ("C - 4", COUNT, "C"),
    ("The answer is: D", COUNT, "D"),
    ("answer: a", COUNT, "A"),
    ("Correct answer: B. The two views share one person.", COUNT, "B"),
    ("I think it's B.", COUNT, "B"),
    ("Step 1: view 1 shows 2 people. Step 2: view 3 shows 3 people, one of whom is new. "
     "Step 3: total = 4. Answer: C", COUNT, "C"),
    ("The best answer is A", COUNT, "A"),
    ("My choice is D because five people are visible across all views.", COUNT, "D"),
    ("Option B is correct.", COUNT, "B"),
    ("From the images, I'd say C.", COUNT, "C"),
    ("Selected: (A)", COUNT, "A"),
    ("The answer is B, not C.", COUNT, "B"),
    ("Answer:\nB", COUNT, "B"),
    ("I pick B.", COUNT, "B"),
    ("4", COUNT, "C"),
    ("five", COUNT, "D"),
]


@pytest.mark.parametrize("text,options,expected", VERBOSE)
def test_verbose_answers(text, options, expected):
    result = parse_answer(text, options)
    assert result.letter == expected and not result.failed, (text, result)


def test_enough_verbose_cases():
    assert len(VERBOSE) >= 25


def test_method_names():
    assert parse_answer("B", COUNT).method == "letter"
    assert parse_answer("The answer is B", COUNT).method == "marker"
    assert parse_answer("I choose B", COUNT).method == "choice"
    assert parse_answer("B. three", COUNT).method == "leading"
    assert parse_answer("3 people", COUNT).method == "option_text"
    assert parse_answer("I think it's B", COUNT).method == "mention"


def test_scores_need_no_parsing():
    assert parse_scores([0.1, 2.0, -1.0, 0.5], COUNT).letter == "B"
    assert parse_scores([0.1, 2.0, -1.0, 0.5], COUNT).method == "scores"
    assert parse_scores([1.0, 1.0, 0.0, 0.0], COUNT).letter == "A"  # ties: the earlier letter
    assert parse_scores([1.0, 2.0], COUNT).failed  # wrong length
    assert parse_scores([math.nan, 1.0, 0.0, 0.0], COUNT).failed
    assert parse_scores(None, COUNT).failed


def test_article_a_versus_letter_a():
    assert parse_answer("A is the right one.", COUNT).letter == "A"
    assert parse_answer("A person in view 2 is hidden; so the answer is D.", COUNT).letter == "D"
    assert parse_answer("I see a ball. I think A.", OBJECTS).letter == "A"
