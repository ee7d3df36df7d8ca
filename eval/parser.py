"""Rule-based extraction of the chosen option from a model's free-text answer.

The rules run from the most to the least explicit reading and stop at the first hit:

1. ``letter``       the whole answer is one letter, maybe wrapped: "B", "(B)", "B.", "**B**", "b".
2. ``marker``       the *last* explicit answer marker: "Answer: B", "The answer is (B).",
                    "Final answer: \\boxed{B}"; the last one wins so a final answer after long
                    reasoning beats letters mentioned on the way.
3. ``choice``       the last "I choose / select / pick / go with (option) B".
4. ``leading``      the answer opens with a labelled letter: "B. 3", "B) three people", "B: ...".
5. ``label``        exactly one distinct option label in the text: "(B)" or "option B".
6. ``option_text``  the option text itself: the whole answer, the phrase after an answer
                    marker, the start of the answer ("3 people" for option "3"), or the only
                    option text a short answer mentions; number words count as digits.
7. ``mention``      exactly one distinct capital letter standing alone ("I think it's B").

Only the sample's own letters are valid, so "The answer..." is never read as T; a capital
"A" or "I" followed by a lower-case word is an article or a pronoun, not a choice, and a
letter glued to more letters ("Based") is a word. When every rule fails the result says so
(``failed=True``); the caller may then ask a fallback extractor. Never a random letter.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from bench.validate import LETTERS

_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}

_OPEN = r"[\(\[\{\"'<]?"
# The letter may not run on into a word or a number ("Based", "A1").
_LETTER = r"([A-Za-z])(?![A-Za-z0-9])"
_ANSWER_MARKER = re.compile(
    r"(?:final\s+answer|correct\s+answer|correct\s+option|correct\s+choice|best\s+answer|answer)"
    r"\s*(?:is|would\s+be|should\s+be|will\s+be|=|:|-)?\s*(?:option|choice|letter)?\s*[:\-]?\s*"
    + _OPEN + _LETTER, re.IGNORECASE)
_CHOICE_MARKER = re.compile(
    r"\b(?:choose|chose|choosing|select|selecting|selected|pick|picked|picking|go\s+with|going\s+with|"
    r"opt\s+for|my\s+choice\s+is|i'd\s+say|i\s+would\s+say)\s*(?:option|choice|letter|answer)?\s*[:\-]?\s*"
    + _OPEN + _LETTER, re.IGNORECASE)
_LEADING = re.compile(r"^\s*[\(\[]?([A-Za-z])[\)\]\.:](?:\s|$)")
_PAREN_LABEL = re.compile(r"(?<![A-Za-z0-9])\(([A-Za-z])\)")
_OPTION_LABEL = re.compile(r"\boption\s+([A-Z])(?![A-Za-z0-9])", re.IGNORECASE)
_MENTION = re.compile(r"(?<![A-Za-z0-9'])([A-Z])(?![A-Za-z0-9'])")
_AFTER_MARKER = re.compile(r"(?:answer|option)\s*(?:is|would\s+be|should\s+be|:|=)\s*([^\n\.;,]+)", re.IGNORECASE)
_BARE = re.compile(r"^[\s\(\[\{\"'<]*([A-Za-z])[\s\)\]\}\"'>\.:,;!]*$")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{)?([^{}]*?)\}?\s*\}")


@dataclass(frozen=True)
class ParseResult:
    """The letter read from an answer (None when ``failed``) and the rule that read it."""
    letter: str | None
    method: str  # letter | marker | choice | leading | label | option_text | mention | scores | fallback | failed
    failed: bool


FAILED = ParseResult(None, "failed", True)


def _clean(text: str) -> str:
    """Drop reasoning tags and Markdown emphasis; they carry no choice and hide the letter."""
    after_think = _THINK.sub("", text).strip()
    if after_think:
        text = after_think
    text = _BOXED.sub(lambda m: f" answer: {m.group(1)} ", text)
    text = re.sub(r"\*\*|__|`|\*", "", text)
    return text.strip()


# Words after which a lone "A" / "I" is still an option letter ("A and C", "A is right").
_FUNCTION_WORDS = set("and or nor but is was are were seems seem looks would could might should must because since "
                      "as then than vs versus also too with without fits matches only".split())


def _is_article(text: str, match: re.Match, group: int = 1) -> bool:
    """A capital A or I followed by a lower-case word is an article / pronoun, not a choice."""
    letter = match.group(group)
    following = re.match(r"\s+([a-z]+)", text[match.end(group):])
    return letter in "AaIi" and following is not None and following.group(1) not in _FUNCTION_WORDS


def _last_valid(pattern: re.Pattern, text: str, letters: str) -> str | None:
    found = None
    for m in pattern.finditer(text):
        letter = m.group(1).upper()
        if letter in letters and not _is_article(text, m):
            found = letter
    return found


def _norm(text: str) -> str:
    """Lower case, number words as digits, punctuation as spaces, single spaces."""
    words = re.sub(r"[^\w\s%\-\.]|(?<!\d)\.|\.(?!\d)", " ", text.lower()).split()
    return " ".join(_NUMBER_WORDS.get(w, w) for w in words)


def _match_option_text(text: str, options: list[str], letters: str) -> str | None:
    norm_opts = [(_norm(o), letters[i]) for i, o in enumerate(options)]
    norm_text = _norm(text)
    if not norm_text:
        return None
    for opt, letter in norm_opts:
        if norm_text == opt:
            return letter

    def leading(fragment: str) -> str | None:
        # Longest first, so "none of the above" beats an option "none".
        for opt, letter in sorted(norm_opts, key=lambda x: -len(x[0])):
            if opt and (fragment == opt or fragment.startswith(opt + " ")):
                return letter
        return None

    markers = _AFTER_MARKER.findall(text)
    if markers:
        hit = leading(_norm(markers[-1]))
        if hit:
            return hit
    hit = leading(norm_text)
    if hit:
        return hit
    if len(norm_text.split()) <= 20:
        hits = {letter for opt, letter in norm_opts if opt and re.search(rf"(?<!\S){re.escape(opt)}(?!\S)", norm_text)}
        if len(hits) == 1:
            return hits.pop()
    return None


def parse_answer(text: str | None, options: list[str]) -> ParseResult:
    """Read the chosen option of a free-text answer.

    Args:
        text: the model's raw output.
        options: the option texts as shown to the model (their letters are the valid ones).
    Returns:
        ParseResult(letter, method, failed); letter is one of the sample's letters or None.
    """
    if not text or not text.strip():
        return FAILED
    letters = LETTERS[: len(options)]
    text = _clean(text)
    m = _BARE.match(text)
    if m and m.group(1).upper() in letters:
        return ParseResult(m.group(1).upper(), "letter", False)
    letter = _last_valid(_ANSWER_MARKER, text, letters)
    if letter:
        return ParseResult(letter, "marker", False)
    letter = _last_valid(_CHOICE_MARKER, text, letters)
    if letter:
        return ParseResult(letter, "choice", False)
    m = _LEADING.match(text)
    if m and m.group(1).upper() in letters:
        return ParseResult(m.group(1).upper(), "leading", False)
    labels = {x.upper() for x in _PAREN_LABEL.findall(text) + _OPTION_LABEL.findall(text)} & set(letters)
    if len(labels) == 1:
        return ParseResult(labels.pop(), "label", False)
    letter = _match_option_text(text, options, letters)
    if letter:
        return ParseResult(letter, "option_text", False)
    mentions = {m.group(1) for m in _MENTION.finditer(text) if m.group(1) in letters and not _is_article(text, m)}
    if len(mentions) == 1:
        return ParseResult(mentions.pop(), "mention", False)
    return FAILED


def parse_scores(scores: list[float] | None, options: list[str]) -> ParseResult:
    """The argmax of per-option scores (higher is better); failed on a wrong length or NaN."""
    if scores is None or len(scores) != len(options):
        return FAILED
    try:
        values = [float(s) for s in scores]
    except (TypeError, ValueError):
        return FAILED
    if not all(math.isfinite(v) or v == -math.inf for v in values) or all(v == -math.inf for v in values):
        return FAILED
    best = max(range(len(values)), key=lambda i: (values[i], -i))
    return ParseResult(LETTERS[best], "scores", False)
