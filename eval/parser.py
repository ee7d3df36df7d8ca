"""Rule-based extraction of the chosen option from a model's free-text answer.

The rules run from the most to the least explicit reading and stop at the first that decides
(``method`` names it; ``confidence`` says whether the answer stated the option, only mentioned
it, or the read is a guess):

1. ``letter``       the whole answer is one letter, maybe wrapped: "B", "(B)", "B.", "**B**", "b";
   ``option_text``  or the whole answer is one option's text: "3", "Right hand", "None of the above",
                    or its option word in another language on its own: "左", "はい、...", "Nein.".
2. ``marker`` / ``choice``  an explicit statement; the *last* one wins, so a final answer after
                    long reasoning beats letters discussed on the way. ``marker``: "Answer: B",
                    "the correct answer to this question is (C) picture C", "Option C is the most
                    likely correct answer", "the most likely real photograph is:\n(A) ...";
                    ``choice``: "I would select Point C", "I'd go with 4". A statement whose value
                    lists several options as equals ("the correct choice (A, B, C, or D)", "(A) ... or
                    (B) ...", an option list on the next lines) names no letter; only a later
                    conclusion ("..., so C") can then answer. One verdict per option ("so the answer
                    is (A). ... so the answer is (B).") or a conclusion after the last statement that
                    asserts another option ("Answer: A ... Therefore, Box B fits better.") reads none.
3. ``leading``      the answer opens with a labelled letter and lists no other: "B. 3", "C) ...".
   A hedge or refusal ("not possible to tell", "I cannot determine", "N/A", "both look real")
   stops here with no letter, unless a turn leads on to a conclusion ("hard to tell, but point
   A ..."); what follows is then read as a guess.
4. ``claim``        what the answer asserts (eval/parser_stance.py): its first sentence whose main
   ``closing``      clause asserts one option (``claim``), and its conclusion, the last such sentence
                    when it closes the answer ("so / therefore / based on this ..." or among the last
                    three sentences; ``closing``). Options set against another ("Box B, on the other
                    hand, ...", "..., whereas the third image ...", "compared to point A") or judged
                    negatively ("Box A is too small") are not asserted. Claim and conclusion must
                    agree; a conclusion overrules a descriptive start ("Point A is on the back wall.
                    ... Therefore, point B is closer."), never a judgement that opens the answer
                    ("Box A fits most closely. ... So Box B is better." reads none). Descriptions in
                    series ("Point A is on the table. Point B is on the wall.") read none.
5. ``label``        exactly one distinct option label anywhere: "(B)", "option B";
   ``option_text``  an option text opens the answer ("3 people"), or is the only one a short
                    answer names ("The pole."); number words count as digits;
   ``mention``      exactly one distinct capital letter standing alone ("I think it's B");
   ``claim``        a one-sentence answer that judges one option ("Point A, on the car, is closer").

Only the sample's own letters are valid, so "The answer..." is never read as T. A capital "A"
or "I" before a lower-case word is an article or a pronoun, not a choice; letters that label
images or points ("image (C)", "point A" when no option is "Point A", "images B and C") are
not options, unless the options are the images in order ("the first image" ... "the fourth
image": "image (D)" is D either way); options "A is closer" / "B is closer" are also named by
their subject letter ("point A appears to be closer"); a negated or compared mention ("not C",
"A is wrong", "than point B", "compared to the area B") does not count. When every rule fails
the result says so (``failed=True``); the caller may then ask a fallback extractor. Never a
random letter.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from bench.constants import LETTERS
from eval.parser_options import Mention, OptionIndex
from eval.parser_stance import conclusion_after, read_sentence, read_stance
from eval.parser_statements import find_statements, joined_as_list, list_letter
from eval.parser_text import CONCLUSION, EQUAL, HEDGE, OVERRIDE, REFUSAL, TENTATIVE, clean, sentences, words

_BARE = re.compile(r"^[\s\(\[\{\"'<]*([A-Za-z])[\s\)\]\}\"'>\.:,;!]*$")
_LEADING = re.compile(r"^\s*[\(\[]?([A-Za-z])(?:[\)\]\.:]|[ \t]+-)(?=\s|$)")
# An opening option text stands alone: then a unit word at most, then a stop ("4 (two in view 1 ...)").
_OPENING_ALONE = re.compile(r"(?:[ \t]+(?:people|persons|person|times|objects|items))?[ \t]*(?:$|\n|[(.,;:\-–—])")
# "The first and the second image both ...": two candidates joined right before "both" (not "they both").
_JOINED_BEFORE = re.compile(r"\b(?:and|or)\s+(?![^,;.]*\b(?:they|these|those|we|it)\s*$)[^,;.]{1,30}$", re.IGNORECASE)
# "While it is difficult to say conclusively, ...": a doubt conceded on the way to a claim.
_CONCEDED = re.compile(r"(?i)\b(?:while|although|though|albeit|despite|even\s+if)\b[^.!?\n]{0,40}\Z")
_LETTER_MASK = re.compile(r"(?<![a-z0-9])[a-e](?![a-z0-9])")
_CORRECTION = re.compile(r"(?i)\b(?:wait|actually|correction|instead|mistake|on\s+second\s+thought|re-?consider\w*)\b")
_DESCRIPTIVE_BOTH = re.compile(r"both\s+(?:\w+ly\s+)?(?:look|seem|appear|share|have|show)")
SHORT_ANSWER_WORDS = 20  # an option text counts anywhere only in answers this short
SHORT_OPENING_WORDS = 12  # an option text that opens an answer counts when its first sentence is this short


# How sure a read is: the answer states the option, only mentions it, or the read is a guess
# (a tentative or hedged answer, or another model's reading of it); "none" when nothing was read.
STATEMENT, MENTION, GUESS, NONE = "statement", "mention", "guess", "none"
CONFIDENCES = (STATEMENT, MENTION, GUESS, NONE)
_METHOD_CONFIDENCE = {"letter": STATEMENT, "marker": STATEMENT, "choice": STATEMENT, "leading": STATEMENT,
                      "claim": STATEMENT, "closing": STATEMENT, "scores": STATEMENT, "label": MENTION,
                      "option_text": MENTION, "mention": MENTION, "fallback": GUESS, "failed": NONE}


def method_confidence(method: str) -> str:
    """The confidence a rule's reads have unless the answer hedges (prediction lines without one)."""
    return _METHOD_CONFIDENCE.get(method, MENTION)


@dataclass(frozen=True)
class ParseResult:
    """The letter read from an answer (None when ``failed``), the rule that read it and how sure the
    read is (``confidence``: statement | mention | guess | none; by default the rule's own)."""
    letter: str | None
    # letter | marker | choice | leading | claim | closing | label | option_text | mention | scores
    # | fallback | failed
    method: str
    failed: bool
    confidence: str = ""

    def __post_init__(self):
        if not self.confidence:
            object.__setattr__(self, "confidence", NONE if self.failed else method_confidence(self.method))


FAILED = ParseResult(None, "failed", True)


def _confidence(text: str, pos: int, start: int, sure: str) -> str:
    """``sure``, or a guess when the answer hedged before (``start`` > 0) or words the read sentence
    tentatively ("might be", "if I had to choose")."""
    s, e = next(((s, e) for s, e in sentences(text) if s <= pos < e), (pos, len(text)))
    return GUESS if start or TENTATIVE.search(text, s, e) else sure


def _leading(text: str, index: OptionIndex) -> str | None:
    """"B. 3" / "(C) 4 people" / "B.\nBecause ...": the answer opens with a label, then an option
    text, a line break or a new sentence (not "(A) is on the handle"), and no line opens with another."""
    m = _LEADING.match(text)
    if not m or m.group(1).upper() not in index.letters:
        return None
    letter = m.group(1).upper()
    rest = text[m.end():]
    after = m.end() + len(rest) - len(rest.lstrip(" \t"))
    if not (index.text_at(text, after) or re.match(r"[ \t]*(?:\n|$)|\s+[A-Z0-9\"(]", rest)):
        return None
    starts = [n.end() for n in re.finditer(r"\n\s*(?=\S)", text)]
    if any(list_letter(text, s, index) not in (None, letter) for s in starts):
        return None
    return letter


def _listed(text: str, statements: list) -> bool:
    """The last two statements are lines of a list: adjacent lines that open alike, other letters."""
    if len(statements) < 2 or statements[-2].letter in (None, statements[-1].letter):
        return False
    a, b = statements[-2].start, statements[-1].start
    line_a, line_b = text.rfind("\n", 0, a) + 1, text.rfind("\n", 0, b) + 1
    between = text[text.find("\n", a):line_b] if "\n" in text[a:b] else None
    return (between is not None and not between.strip() and text[line_a:a].strip() != ""
            and text[line_a:a].strip().lower() == text[line_b:b].strip().lower())


def _verdicts(text: str, statements: list) -> bool:
    """The statements give one verdict per option ("so the answer is (B). ... so the answer is (C)."):
    three letters or more, or the last two alike word for word but for their letters."""
    letters = {st.letter for st in statements if st.letter}
    if len(letters) > 2:
        return True
    if len(statements) < 2 or statements[-2].letter in (None, statements[-1].letter):
        return False
    a, b = (_lead_words(text, st.start) for st in statements[-2:])
    return a == b and not _CORRECTION.search(text, statements[-2].start, statements[-1].start)


def _lead_words(text: str, pos: int) -> list[str]:
    """The last words before a statement's value in its sentence (the sentence before when the value
    opens its own line), letters masked: "therefore, the answer is", "the corresponding point is:"."""
    spans = sentences(text)
    i = next((i for i, (s, e) in enumerate(spans) if s <= pos < e), len(spans) - 1)
    lead = text[spans[i][0]:pos]
    if not lead.strip() and i > 0:
        lead = text[spans[i - 1][0]:spans[i - 1][1]]
    return _LETTER_MASK.sub("<L>", lead.lower()).split()[-4:]


def _equals_options(text: str, m: re.Match, index: OptionIndex) -> bool:
    """Descriptive "both ..." and "either ... or" give options as equals only when their sentence names
    two ("Both A and C look real", "either A or C"): not "Both show a red barn", "either edited or staged"."""
    found = m.group(0).lower()
    if not (found.startswith("either") or _DESCRIPTIVE_BOTH.match(found)):
        return True  # "could be either", "equally", "both are plausible"
    s, e = next(((s, e) for s, e in sentences(text) if s <= m.start() < e), (0, len(text)))
    return len(_letters(index.mentions(text, s, e))) > 1 or bool(_JOINED_BEFORE.search(text[s:m.start()]))


def _after_doubt(text: str, index: OptionIndex) -> int | None:
    """Where the readable part starts: 0, or after the turn that follows the last doubt, or None.

    After a hedge only a turn ("but", "however") lets a conclusion count; after candidates given
    as equals ("both have artefacts") a conclusion ("therefore ...") may also pick one of them.
    """
    nota = [m for m in index.mentions(text) if m.kind == "text" and "none" in text[m.start:m.end].lower()]
    doubts = [(m.end(), turns) for pat, turns in ((HEDGE, (OVERRIDE,)), (EQUAL, (OVERRIDE, CONCLUSION)))
              for m in pat.finditer(text) if not any(n.start <= m.start() < n.end for n in nota)
              and (_equals_options(text, m, index) if pat is EQUAL else not _CONCEDED.search(text[:m.start()]))]
    # After a refusal ("I'm sorry, but ..."), a turn counts only from the next sentence on.
    doubts += [(next((e for _, e in sentences(text) if e > m.end()), len(text)), (OVERRIDE,))
               for m in REFUSAL.finditer(text)]
    if not doubts:
        return 0
    last, turns = max(doubts, key=lambda d: d[0])
    after = [m.end() for pat in turns for m in pat.finditer(text, last)]
    return min(after) if after else None


def _letters(mentions: list[Mention], kind: str | None = None) -> set[str]:
    return {m.letter for m in mentions if kind is None or m.kind == kind}


def _anywhere(text: str, start: int, index: OptionIndex) -> ParseResult:
    """One option named anywhere: a single label, an opening or lone option text, a single letter."""
    mentions = index.mentions(text, start)
    if joined_as_list(text, mentions):
        return FAILED
    labels, texts, bares = _letters(mentions, "label"), _letters(mentions, "text"), _letters(mentions, "bare")
    if any(a.kind == "label" and b.kind == "text" and a.letter != b.letter and not text[a.end:b.start].strip(" \t:.-")
           for a, b in zip(mentions, mentions[1:])):
        return FAILED  # "(A) the third image" with options second / third image: letter and text disagree
    if len(labels) == 1:
        return ParseResult(labels.pop(), "label", False)
    if labels:
        return FAILED
    region = text[start:]
    first = next(((s, e) for s, e in sentences(text) if e > start), None)
    opening = mentions[0] if mentions else None
    if (opening and opening.kind == "text" and not region[:opening.start - start].strip(" \t\n\"'(")
            and first and words(text[first[0]:first[1]]) <= SHORT_OPENING_WORDS
            and (texts | bares == {opening.letter} or _OPENING_ALONE.match(text, opening.end))):
        # "3 people, one of them only in view 2"; not "Point A is on the table. Point B is ..."
        return ParseResult(opening.letter, "option_text", False)
    if len(texts) == 1 and bares <= texts and words(region) <= SHORT_ANSWER_WORDS:
        return ParseResult(texts.pop(), "option_text", False)
    if len(bares) == 1 and texts <= bares:
        return ParseResult(bares.pop(), "mention", False)
    return FAILED


def lone_pos(text: str, start: int) -> int:
    """Where the part the lone-mention rules read starts (its first non-blank character)."""
    return len(text) - len(text[start:].lstrip()) if text[start:].strip() else start


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
    index = OptionIndex(options)
    text = clean(text)
    if not text:
        return FAILED
    m = _BARE.match(text)
    if m and m.group(1).upper() in index.letters:
        return ParseResult(m.group(1).upper(), "letter", False)
    whole = index.whole(text)
    if whole:
        return ParseResult(whole, "option_text", False, STATEMENT)
    start = 0
    statements = find_statements(text, index)
    if statements:
        last = statements[-1]
        if last.letter and (_listed(text, statements) or _verdicts(text, statements)):
            return FAILED  # "Select (A) the second image\nSelect (B) the third image"; one verdict per option
        if last.letter:
            if conclusion_after(text, last.end, index) not in (None, last.letter):
                return FAILED  # "Answer: A ... Therefore, Box B fits better."
            return ParseResult(last.letter, last.kind, False, _confidence(text, last.start, 0, "statement"))
        # Listed candidates: only a conclusion after the list can answer.
        turn = [c.end() for pat in (OVERRIDE, CONCLUSION) for c in pat.finditer(text, last.end)]
        if not turn:
            return FAILED
        start = min(turn)
    else:
        letter = _leading(text, index)
        if letter:
            return ParseResult(letter, "leading", False, _confidence(text, 0, 0, STATEMENT))
    after = _after_doubt(text[start:], index)
    if after is None:
        return FAILED
    start += after
    stance = read_stance(text, start, index)
    if stance is not None:
        if stance.letter is None:
            return FAILED
        return ParseResult(stance.letter, stance.method, False, _confidence(text, stance.pos, start, STATEMENT))
    lone = _anywhere(text, start, index)
    if not lone.failed:
        return ParseResult(lone.letter, lone.method, False, _confidence(text, lone_pos(text, start), start, MENTION))
    if letter := read_sentence(text, start, index):
        return ParseResult(letter, "claim", False, _confidence(text, lone_pos(text, start), start, STATEMENT))
    return lone


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
