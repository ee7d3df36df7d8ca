"""Explicit statements of a choice: "the answer is (C)", "I would select Point C", "Option C is correct".

Each statement has a value: a letter ("(C)", "option C", "C."), an option's text ("Point C",
"the third image") or both ("(A) the second image": the letter decides). A value that goes on
to list other options as equals ("the correct choice (A, B, C, or D)", "(A) ... or (B) ...",
"either A or B", an option list on the next lines) makes the statement ambiguous: it says no
letter, and only a later conclusion can.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from eval.parser_options import Mention, OptionIndex, is_article
from eval.parser_text import HYPOTHETICAL, sentences

_QUAL = (r"(?:correct|right|best|final|true|proper|only|likely|probable|plausible|appropriate|accurate|suitable"
         r"|reasonable|most\s+likely|most\s+probable|most\s+plausible|most\s+appropriate|most\s+accurate"
         r"|most\s+suitable"
         r"|most\s+reasonable|my|our)")
# "the answer", "Answer:" at a line start, "correct answer"; not "each answer:", "answer options", "to answer the".
_NOUN = (rf"(?:\b(?:the|my|our)\s+(?:{_QUAL}\s+)*|\b{_QUAL}\s+(?:{_QUAL}\s+)*|(?m:^)[ \t>\-]*|(?<=[,;.])[ \t]+)"
         r"answer\b"
         r"(?!\s+(?:options?|choices?|key|sheet|format|the|this|that|it|with|these|based|by|in\s+the\s+form)\b)"
         rf"|\b(?:the\s+|my\s+|our\s+)?{_QUAL}\s+(?:{_QUAL}\s+)*(?:option|choice|selection|response|guess|pick)\b(?!s)"
         r"|\bthe\s+(?:option|choice)(?=\s+(?:that|which)\b)")
_NOUN_OTHER = (r"(?:最终|最終|正确|正確)?(?:答案|答え|正解|回答|정답|답변)|(?:正确|正確)(?:选项|選項)"
               r"|\b(?:la\s+)?(?:bonne\s+)?réponse(?:\s+(?:correcte|finale))?"
               r"|\b(?:la\s+)?respuesta(?:\s+(?:correcta|final))?"
               r"|\b(?:die\s+)?(?:richtige\s+)?antwort|\b(?:la\s+)?risposta(?:\s+(?:corretta|giusta|finale))?"
               r"|\b(?:a\s+)?resposta(?:\s+(?:correta|final))?|(?:правильный\s+)?ответ")
# Up to ten words between the noun and its verb ("the correct answer, based on the handle, is");
# words are separated by spaces or commas, so a word cannot be split (no backtracking blow-up).
_GAP = r"(?P<gap>(?:(?:[ \t]*,[ \t]*|[ \t]+)(?:\"[^\"\n]{0,80}\"|[^\s.!?:;\n\"=,]+)){0,10}?)"
_COPULA = (r"(?:[ \t]*,?[ \t]*(?:is|was|would\s+be|should\s+be|will\s+be|must\s+be|has\s+to\s+be|seems\s+to\s+be"
           r"|appears\s+to\s+be|remains|est|es|ist|lautet|è|é)(?![A-Za-z])(?!\s+(?:not|n't)\b)|[ \t]*(?:=|:|-|–|—)"
           r"|[ \t]*(?:应该是|應該是|就是|是|为|為|は|은|는|：)|(?=[ \t]*[\(\[])|[ \t]*(?=\n))[ \t]*:?")
_MARKER = re.compile(rf"(?:{_NOUN}|{_NOUN_OTHER}){_GAP}{_COPULA}", re.IGNORECASE)
# "... is:" at a line end, then the value on the next line ("the most likely real photograph is:\n(A) ...").
_COLON_LINE = re.compile(r"\b(?:is|would\s+be|will\s+be|should\s+be|as\s+follows)[ \t]*:[ \t]*(?=\n)", re.IGNORECASE)
_CHOICE = re.compile(
    r"(?<![A-Za-z'])(?:(?:i|we)\s+(?:would\s+|will\s+|'d\s+|'ll\s+|should\s+|must\s+|shall\s+|can\s+)?"
    r"(?:definitely\s+|rather\s+)?"
    r"|let's\s+|let\s+us\s+)?(?:choose|chose|select|selected|pick|picked|go\s+with|going\s+with|went\s+with|opt\s+for"
    r"|opted\s+for|settle\s+on|vote\s+for|choosing|selecting|picking)(?![A-Za-z])|\bI'?d\s+say|\bI\s+would\s+say"
    r"|\bI\s+count(?:ed)?(?![A-Za-z])"
    r"|\bje\s+choisis|\bj'opte\s+pour|\bje\s+sélectionne|\belijo\b|\bescojo\b|\bselecciono\b|\bich\s+wähle|\bscelgo\b"
    r"|\bescolho\b|\bвыбираю\b|我(?:会|會)?(?:选择|選擇|选|選)|应该?选|應該?選|选择|選擇", re.IGNORECASE)
# Every marker names its noun, every choice its verb: the searches start from these words.
_MARKER_ANCHOR = ("answer", "option", "choice", "selection", "response", "guess", "pick", "答", "正解", "回答", "정답",
                  "답변", "选项", "選項", "réponse", "respuesta", "antwort", "risposta", "resposta", "ответ")
_CHOICE_ANCHOR = ("choos", "chose", "select", "selecc", "pick", "with", "opt", "settle", "vote", "say", "count",
                  "choisis", "sélectionne", "elijo", "escojo", "wähle", "scelgo", "escolho", "выбираю", "选", "選")
_CHOICE_TAIL = re.compile(r"[ \t]*[:\-]?[ \t]*")
_REVERSE_TAIL = re.compile(
    r"[\)\]\"'\s]*(?:\s+(?:in|of|from|among)\s+the\s+(?:options|choices|list))?,?\s*"
    r"(?:is|would\s+be|should\s+be|must\s+be|seems\s+to\s+be|appears\s+to\s+be|remains)\s+"
    r"(?:clearly\s+|indeed\s+|definitely\s+|also\s+)?(?:the\s+|my\s+|our\s+)?"
    r"(?:(?:most\s+likely|most\s+probably|most\s+probable|clearly|definitely|indeed|only|final|single)\s+)*"
    r"(?:correct\b|right\b(?!\s+(?:next|behind|in|above|below|of|side|hand|edge|corner|there|here|at|on|under|beside|to"
    r"|by|now|after|before)\b)|accurate\b|appropriate\b|best\b|answer\b|choice\b|option\b|true\b"
    r"|one\s+(?:that|which)\s+(?:matches|fits|corresponds))"
    r"|\s*(?:是正确|是正確|正确|正確|是对的|が正解|が正しい|を選|가\s*정답|이\s*정답|이\s*맞)", re.IGNORECASE)
_NOT_BEFORE = re.compile(r"(?i)(?:\bnot|n't|\bnever)\s+(?:\w+\s+)?\Z")
_IF_BEFORE = re.compile(r"(?i)\b(?:if|whether|assuming|suppose|unless)\b[^.,;:\n]*\Z")
_GAP_BAD = re.compile(r"(?i)\b(?:whether|if|depends?|unless|neither|nor|none|not|never)\b|n't\b")

_FILLER = re.compile(r"[\s\"'\-–—:>]*(?:(?:the|la|le|l'|el|die|der|das|il|lo)\s*)?"
                     r"(?:(?:correct|right|best|final)\s+(?=option|choice|letter|answer))?"
                     r"(?:(?:option|choice|letter|answer|opci[oó]n|opzione|选项|選項)\b\s*)?[\s\"':]*", re.IGNORECASE)
_IMAGE_NOUN = re.compile(r"(?:image|picture|photo|photograph)[ \t]*(?=[\(\[]?[ \t]*[A-Z](?![A-Za-z0-9]))", re.IGNORECASE)
_AMBIGUOUS_VALUE = re.compile(r"(?i)(?:either|between|one\s+of|any\s+of|both|several|multiple)\b")
_NEGATIVE_VALUE = re.compile(r"(?i)(?:not|n't|never)\b")
_LETTER_VALUE = re.compile(r"([\(\[\{<]?)\s*([A-Za-z])\s*[\)\]\}>]?(?![A-Za-z0-9'])")
_LIST_JOIN = re.compile(r"[\s)\].]*(?:,|/|&|\bor\b|\band\b|、|或者?|和|\bou\b|\bo\b|\boder\b|\bund\b|\bили\b|\bи\b)"
                        r"[\s,]*(?:(?:or|and)\s+)?(?:(?:option|choice)\s+)?[(\[]?", re.IGNORECASE)
_LINE_START = re.compile(r"[ \t]*(?:[-•>][ \t]*|\d+[.)][ \t]*)?")


@dataclass(frozen=True)
class Statement:
    """A stated choice: ``letter`` None when it lists several options as equals.

    ``start`` is where the value starts (the last statement wins); ``end`` where the statement
    ends, so that text after an ambiguous one can still conclude.
    """
    letter: str | None
    kind: str  # marker | choice
    start: int
    end: int


def read_value(text: str, pos: int, index: OptionIndex) -> Mention | None | str:
    """The option a statement names at ``pos``: a Mention, "ambiguous", or None (no value)."""
    p = _FILLER.match(text, pos).end()
    if _AMBIGUOUS_VALUE.match(text, p):
        return "ambiguous"
    if _NEGATIVE_VALUE.match(text, p):
        return None
    image = _IMAGE_NOUN.match(text, p)  # "image (B)": an option only when the images are the options in order,
    if image:                            # or when the option text that follows says the same ("image B, the third image")
        m = _LETTER_VALUE.match(text, image.end())
        if m and m.group(2).upper() in index.letters:
            follow = index.text_at(text, re.compile(r"[\s,.:;()\-]*").match(text, m.end()).end())
            if (follow and follow.letter == m.group(2).upper()) or (index.images_in_order and not follow):
                return Mention(m.group(2).upper(), "label", m.start(), follow.end if follow else m.end())
        return index.text_at(text, p)
    m = _LETTER_VALUE.match(text, p)
    if m and m.group(2).upper() in index.letters and (m.group(1) or not is_article(text, m.start(2), m.end(2))):
        value = Mention(m.group(2).upper(), "label", m.start(), m.end())
        follow = index.text_at(text, m.end() + len(re.match(r"[\s.:)\-]*", text[m.end():]).group(0)))
        return Mention(value.letter, "label", value.start, follow.end) if follow else value
    return index.text_at(text, p)


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, len(text) if end < 0 else end


def list_letter(text: str, line_start: int, index: OptionIndex) -> str | None:
    """The option a line opens with ("(B) picture B", "- Point B: ...", "B. 3"), if it opens with one."""
    _, line_end = _line_bounds(text, line_start)
    first = _LINE_START.match(text, line_start).end()
    mentions = index.mentions(text, first, line_end)
    return mentions[0].letter if mentions and mentions[0].start == first else None


def joined_as_list(text: str, mentions: list[Mention]) -> bool:
    """Two options joined as a list ("left hand or right hand", "A, B"): candidates, not a choice."""
    return any(a.letter != b.letter and _LIST_JOIN.fullmatch(text[a.end:b.start])
               for a, b in zip(mentions, mentions[1:]))


def _next_line(text: str, pos: int) -> int | None:
    m = re.compile(r"\n\s*(?=\S)").search(text, pos)
    return m.end() if m else None


def _ambiguous_after(text: str, value: Mention, index: OptionIndex) -> bool:
    """The value goes on to list other options: "(A) ... or (B) ...", "A, B, C or D", or list lines."""
    _, line_end = _line_bounds(text, value.end)
    for other in index.mentions(text, value.end, line_end):
        if other.letter != value.letter:
            between = text[value.end:other.start]
            return bool(_LIST_JOIN.fullmatch(between) or (other.kind == "label" and not between.strip()))
    nxt = _next_line(text, value.end)
    return nxt is not None and list_letter(text, nxt, index) not in (None, value.letter)


def _statement_end(text: str, value_end: int, ambiguous: bool, index: OptionIndex) -> int:
    """End of the value's sentence; an ambiguous one also takes the option lines that follow it."""
    end = next((e for s, e in sentences(text) if e >= value_end), len(text))
    if ambiguous:
        while (nxt := _next_line(text, end)) is not None and list_letter(text, nxt, index) is not None:
            end = _line_bounds(text, nxt)[1]
    return end


def _reported(text: str, pos: int) -> bool:
    """The statement is reported or doubted, not made ("whether the answer is A", "not choose B")."""
    sent_start = max((s for s, _ in sentences(text) if s <= pos), default=0)
    return bool(HYPOTHETICAL.search(text, max(sent_start, pos - 300), pos)
                or _NOT_BEFORE.search(text, max(0, pos - 20), pos))


def _make(text: str, value, kind: str, pos: int, index: OptionIndex) -> Statement | None:
    if value is None:
        return None
    if value == "ambiguous":
        return Statement(None, kind, pos, _statement_end(text, pos, True, index))
    ambiguous = _ambiguous_after(text, value, index)
    return Statement(None if ambiguous else value.letter, kind, value.start,
                     _statement_end(text, value.end, ambiguous, index))


def _near(pattern: re.Pattern, anchors: tuple[str, ...], text: str, before: int, after: int):
    """``pattern.finditer(text)``, searched only around the words every match contains (``anchors``,
    lower case): the same matches, in order, at a fraction of the cost on long answers."""
    low = text.lower()
    if len(low) != len(text):  # a character that lower-cases to two: search everything
        yield from pattern.finditer(text)
        return
    hits = []
    for word in anchors:
        i = low.find(word)
        while i >= 0:
            hits.append((i, i + len(word)))
            i = low.find(word, i + 1)
    spans: list[list[int]] = []
    for a, b in sorted(hits):
        lo, hi = max(0, a - before), min(len(text), b + after)
        if spans and lo <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], hi)
        else:
            spans.append([lo, hi])
    last = -1
    for lo, hi in spans:
        for m in pattern.finditer(text, max(lo, last), hi):
            last = m.end() if m.end() > m.start() else m.end() + 1
            yield m


def find_statements(text: str, index: OptionIndex) -> list[Statement]:
    """Every explicit statement of a choice in ``text``, in order of position.

    Args:
        text: the cleaned answer.
        index: the sample's options.
    Returns:
        statements sorted by where their value starts; one per value position.
    """
    found: dict[int, Statement] = {}
    for m in _near(_MARKER, _MARKER_ANCHOR, text, 100, 320):
        if _GAP_BAD.search(m.group("gap") or "") or _reported(text, m.start()):
            continue
        st = _make(text, read_value(text, m.end(), index), "marker", m.end(), index)
        if st:
            found.setdefault(st.start, st)
    for m in _COLON_LINE.finditer(text):
        st = _make(text, read_value(text, m.end(), index), "marker", m.end(), index)
        if st and not _reported(text, m.start()):
            found.setdefault(st.start, st)
    for m in _near(_CHOICE, _CHOICE_ANCHOR, text, 40, 60):
        if _reported(text, m.start()):
            continue
        pos = _CHOICE_TAIL.match(text, m.end()).end()
        st = _make(text, read_value(text, pos, index), "choice", pos, index)
        if st:
            found.setdefault(st.start, st)
    for mention in index.mentions(text):
        if (_REVERSE_TAIL.match(text, mention.end) and not _reported(text, mention.start)
                and not _IF_BEFORE.search(text, max(0, mention.start - 60), mention.start)):
            st = _make(text, mention, "marker", mention.start, index)
            if st:
                found.setdefault(st.start, st)
    return [found[k] for k in sorted(found)]
