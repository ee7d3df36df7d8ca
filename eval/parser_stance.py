"""What a long answer asserts: its first claim and its conclusion, apart from what it contrasts.

An answer usually states its choice in its first assertive sentence and then sets it against
the options it rejects ("Box A, on the other hand, is larger", "whereas the third image ...",
"compared to point A"). Every sentence that names an option gets a role:

* ``assert``: its main clause names one option, without a negative judgement;
* ``reject``: its main clause judges its option negatively ("Box A is too small", "does not fit");
* ``contrast``: it opens with or sets off a contrast ("In contrast, ...", "X, on the other
  hand, ...", "The third image, while also ..., ..."), or names options only in a side clause
  ("..., whereas the third image ...");
* ``compare``: its main clause names one option and a side clause another ("A is on the
  table, while B ..."): a comparison, which asserts only as a conclusion ("so ...");
* ``multi``: its main clause names several options;
* ``reason``: it gives the reason for what came before ("This is evident from ...").

A sentence *asserts* its option when its role is ``assert`` and nothing it goes on to say of the
option is negative (", which is a different setting"), or when it concludes ("so ...") an
``assert`` or ``compare``. The *claim* is the first sentence that asserts, outside an option
list; the *conclusion* the last one, when it closes the answer: a conclusion cue ("so",
"therefore", "based on this analysis", "in total"), or among the last three sentences with no
contrast after it and not one more addition ("The second image also ..."), not one of a series
said alike of each option. A claim is *strong* when it concludes or when the answer opens with
it and judges ("most similar", "closer", "corresponds"). Then:

* claim and conclusion agree: that option (``claim`` when it is one sentence, else ``closing``);
* a later sentence asserts another option without concluding: a series of descriptions, which
  only a conclusion can decide, and never against a strong claim;
* no conclusion: the claim, when strong, or when it opens the answer and no other option is
  contrasted with it;
* the conclusion asserts another option: it wins over a descriptive claim when it is introduced
  by a cue; otherwise no letter (the fallback or a failure is better than a wrong letter).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from eval.parser_options import OptionIndex
from eval.parser_statements import list_letter
from eval.parser_text import BOILERPLATE, CONCLUSION, EQUAL, sentences

# A sentence that opens with a contrast sets its options against what came before.
_CONTRAST_LEAD = re.compile(
    r"[\s\-•>]*(?:\d+[.)]\s*)?(?:in\s+contrast|by\s+contrast|on\s+the\s+other\s+hand|conversely|on\s+the\s+contrary"
    r"|in\s+comparison|comparatively|meanwhile|similarly|likewise|相比之下|相反|一方|반면|en\s+cambio|por\s+otro\s+lado"
    r"|en\s+revanche|par\s+contre|im\s+gegensatz|dagegen|hingegen|по\s+сравнению|напротив|в\s+то\s+время|por\s+outro\s+lado"
    r")\b", re.IGNORECASE)
# "X, on the other hand, is ...": the same contrast set off after the subject.
_CONTRAST_ASIDE = re.compile(
    r",\s*(?:on\s+the\s+other\s+hand|in\s+contrast|by\s+contrast|however|meanwhile|conversely|though|in\s+comparison"
    r"|on\s+the\s+contrary|instead|too)\s*,|\b(?:while|whilst|although|though)\s+(?:also|still|it|they)\b",
    re.IGNORECASE)
# A sentence that gives the reason for what came before ("This is evident from ...") states no choice.
_JUSTIFICATION = re.compile(
    r"[\s\-•>]*(?:(?:this|that|it)\s+(?:is|was|can\s+be|becomes)\s+(?:\w+ly\s+)?(?:evident|because|due|seen|shown"
    r"|indicated|suggested|supported|clear|apparent|visible)"
    r"|as\s+(?:evidenced|shown|seen)|the\s+reason\s+is)\b", re.IGNORECASE)
# "The second image, while matching the colours, does not ...": a concession set off after the subject.
_SUBJECT_ASIDE = re.compile(r"[ \t]*(?:\([^()\n]{0,30}\))?[ \t]*,[ \t]*(?:while|whilst|although|though|despite|even\s+if)\b"
                            r"[^,.;\n]*,", re.IGNORECASE)
# A subordinate clause first ("While B is larger, A is sharper"): the main clause follows its comma.
_CONCESSIVE_LEAD = re.compile(r"[\s\-•>]*(?:while|whilst|although|though|even\s+though|whereas|despite|unlike|since"
                              r"|because|as\s+(?=the\b)|given\s+that|if"
                              r"|aunque|mientras|bien\s+que|obwohl|хотя)\b", re.IGNORECASE)
# Where a side clause starts: what follows is set against the main clause.
_SIDE_CLAUSE = re.compile(
    r"(?:[,;]\s*|\s+|—\s*)(?:while|whilst|whereas)\b|[,;]\s*(?:but|although|though|yet|however|since|because"
    r"|in\s+contrast|on\s+the"
    r"\s+other\s+hand|unlike|as\s+opposed\s+to|compared\s+(?:to|with)|and\s+not|not)\b|；|，(?:而|但)|而|但是|mientras"
    r"|tandis\s+que|alors\s+que|während|wohingegen|enquanto|тогда\s+как|а\s+", re.IGNORECASE)
_REASON_CLAUSE = re.compile(r"[,;]\s*(?:since|because)\b", re.IGNORECASE)
# A side clause that may turn the judgement ("X has the best light, but Y ..."): the comparison stays open.
_TURN = re.compile(r"[,;]\s*(?:but|yet|however|although|though)\b", re.IGNORECASE)
# A negative judgement of the option the clause names.
_NEGATIVE = re.compile(
    r"\b(?:not|never|too|less|least|lacks?|lacking|fails?|failing|misses|partially|partly|differs?|different\s+(?:from|than|to)"
    r"|(?:is|are|looks?|appears?|seems?|has|have|shows?|depicts?)\s+(?:(?!(?:\d+|one|two|three|four|five|six|seven"
    r"|eight|nine|ten)\b)\w+\s+){0,2}different|unrelated|difference|incorrect|wrong|inconsistent|irrelevant|excessive|poorly|worse|worst|unlikely|doubtful|neither|nor"
    r"|smaller\s+and|only\s+(?:\w+s|part|partly|partially|a\s+(?:small\s+)?(?:part|portion|section|fraction)))\b|n't\b|不是|不符|不同|不像|ではない|아니", re.IGNORECASE)
# A judgement between options ("most similar", "closer", "corresponds"): a claim, not a description.
_EVALUATIVE = re.compile(
    r"\b(?:(?<![0-9] )more|most|better|best|closer|closest|nearer|nearest|farther|farthest|further|darker|darkest|lighter|brighter"
    r"|larger|smaller|higher|lower|likely|likeliest|probabl[ey]|correspond\w*|match(?:es)?|fits|fitting|same|similar"
    r"|appropriate|correct|accurate\w*|right\s+answer|answer|choice|shares?|resembles?|completes?|continues?"
    r"|aligns?|belongs?|consistent|corresponding|identical|precise\w*|tight\w*|fit|stands?\s+out)\b", re.IGNORECASE)
# A count stated as the answer of a one-sentence answer ("there are 3 plates", "the image shows 2 people").
_COUNT = re.compile(
    r"\b(?:there\s+(?:is|are|appears?\s+to\s+be|seems?\s+to\s+be)|shows|contains|I\s+(?:see|count))\s+(?:only\s+"
    r"|exactly\s+|a\s+total\s+of\s+)?(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten)\s+\w+", re.IGNORECASE)
_HEADING = re.compile(r"[\s\-•>#*]*(?:\d+[.)]\s*)?")
_ANY_LABEL = re.compile(r"[ \t]*(?:[-•][ \t]*)?[\(\[]?[A-Z][\)\]\.:][ \t]")
# "The second image also ...", "Additionally, ...": one more description, not a conclusion.
_ADDITION = re.compile(r"[\s\-•>*]*(?:also|additionally|moreover|furthermore|in\s+addition)\b|[^,.;:\n]{0,40}?"
                       r"\b(?:image|picture|point|box|option|one)\b(?:\s*\([^()\n]{0,20}\))?\s+also\b", re.IGNORECASE)
_ASIDE = re.compile(r"[ \t]*(?:\([^()\n]{0,40}\))?[ \t]*,[^,.;:\n]{1,80},")
_CLAUSE_END = re.compile(r"[,;:]|\s(?:because|since|as|which|who|where|and\s+(?:it|this|that)|indicating|suggesting"
                         r"|making|meaning)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Sentence:
    """One option-naming sentence: its role, its main clause's option, and whether it concludes."""
    start: int
    end: int
    role: str  # assert | reject | contrast | compare | multi
    letter: str | None  # the main clause's option (assert / reject / compare)
    cue: bool  # its main clause follows a conclusion cue ("so", "therefore", "based on this")
    evaluative: bool  # it judges ("most similar", "closer"), not only describes
    named: list[str]  # every option it names
    main: int = 0  # where its main clause starts
    bare: bool = False  # the sentence is the option alone ("Box B.")


@dataclass(frozen=True)
class Stance:
    """The option an answer asserts (None: it cannot tell, or its claim and conclusion disagree)."""
    letter: str | None
    method: str  # claim | closing | conflict
    pos: int = 0  # where the sentence that decided starts


def _letters(index: OptionIndex, text: str, a: int, b: int) -> list[str]:
    out: list[str] = []
    for m in index.mentions(text, a, b):
        if m.letter not in out:
            out.append(m.letter)
    return out


def _negative(text: str, index: OptionIndex, a: int, b: int, letter: str) -> bool:
    """The clause of ``letter``'s first mention in [a, b) judges it negatively ("Box A is too small")."""
    first = next((m for m in index.mentions(text, a, b) if m.letter == letter), None)
    if first is None:
        return False
    pos = first.end
    if aside := _ASIDE.match(text, pos, b):  # "The third image, which is a painting of a crowd, does not ..."
        pos = aside.end()
    end = _CLAUSE_END.search(text, pos, b)
    return bool(_NEGATIVE.search(text, first.end, end.start() if end else b))


def classify(text: str, s: int, e: int, index: OptionIndex) -> Sentence | None:
    """The role of the sentence text[s:e], or None when it names no option or is a heading."""
    mentions = index.mentions(text, s, e)
    if not mentions or (len(mentions) == 1 and _HEADING.fullmatch(text, s, mentions[0].start)
                        and re.fullmatch(r"[\s)\].]*:\s*", text[mentions[0].end:e])):
        return None  # "Second image:" heads what follows
    cues = list(CONCLUSION.finditer(text, s, e))
    a = cues[-1].end() if cues and _letters(index, text, cues[-1].end(), e) else s
    cue = a > s  # the option is named in the concluding clause
    a = re.compile(r"[\s,:;]*").match(text, a).end()
    evaluative = bool(_EVALUATIVE.search(text, a, e))
    named = _letters(index, text, a, e)
    if _JUSTIFICATION.match(text, a):
        return Sentence(s, e, "reason", None, cue, evaluative, named)
    first = index.mentions(text, a, e)
    if (_CONTRAST_LEAD.match(text, a) or _CONTRAST_ASIDE.search(text, a, e)
            or (first and _SUBJECT_ASIDE.match(text, first[0].end, e))):
        return Sentence(s, e, "contrast", None, cue, evaluative, named)
    main_start, side = a, []
    lead = _CONCESSIVE_LEAD.match(text, a)
    if lead:
        comma = text.find(",", lead.end(), e)
        if comma < 0:
            return Sentence(s, e, "contrast", None, cue, evaluative, named)
        side += _letters(index, text, a, comma)
        if not side and lead.group(0).strip().lower() == "unlike":
            return Sentence(s, e, "contrast", None, cue, evaluative, named)  # "Unlike it, the third image ..."
        main_start = comma + 1
    # The first side clause; a reason ("..., since ...") only when the main clause has named an option.
    split = next((m for m in _SIDE_CLAUSE.finditer(text, main_start, e)
                  if not _REASON_CLAUSE.match(m.group(0)) or _letters(index, text, main_start, m.start())), None)
    main_end = split.start() if split else e
    main = _letters(index, text, main_start, main_end)
    if split:
        side += _letters(index, text, split.start(), e)
    if len(main) > 1:
        return Sentence(s, e, "multi", None, cue, evaluative, named)
    if not main:
        return Sentence(s, e, "contrast", None, cue, evaluative, named)
    letter = main[0]
    if _negative(text, index, main_start, main_end if set(side) - {letter} else e, letter):
        return Sentence(s, e, "reject", letter, cue, evaluative, named)
    if any(x != letter for x in side):
        # A comparison asserts its main clause when that clause judges ("the third image resembles the
        # first more, while the second ..."), not when it describes ("Box A is drawn around ..., while ...").
        # ... and the side clause does not judge its own option as well ("..., while Box B tightly surrounds it").
        sa, sb = (split.end(), e) if split else (a, main_start)  # the side clause: after the split, or the lead
        judged = (bool(_EVALUATIVE.search(text, main_start, main_end)) and not (split and _TURN.match(split.group(0)))
                  and (not _EVALUATIVE.search(text, sa, sb) or bool(_NEGATIVE.search(text, sa, sb))))
        return Sentence(s, e, "compare", letter, cue, judged, named, main_start)
    bare = not text[main_start:e].replace(text[mentions[0].start:mentions[0].end], "", 1).strip(" \t\n.:;!-*")
    return Sentence(s, e, "assert", letter, cue, evaluative, named, main_start, bare)


def _spans(text: str, start: int) -> list[tuple[int, int]]:
    spans = [(max(s, start), e) for s, e in sentences(text) if e > start and text[max(s, start):e].strip()]
    while spans and BOILERPLATE.match(text[spans[-1][0]:spans[-1][1]]):
        spans.pop()
    return spans


def _shape(text: str, s: int, index: OptionIndex) -> str:
    """How a sentence opens: its first word, or "<option>" when an option opens it."""
    m = re.compile(r"[\s\-•>(\[]*(?:\d+[.)]\s*)?").match(text, s)
    first = index.mentions(text, s, min(len(text), m.end() + 80))
    if first and first[0].start <= m.end():
        return "<option>"
    w = re.compile(r"\w+").match(text, m.end())
    return w.group(0).lower() if w else ""


def _masked(text: str, r: Sentence, index: OptionIndex) -> str:
    out, pos = [], r.start
    for m in index.mentions(text, r.start, r.end):
        out.append(text[pos:m.start])
        out.append("<option>")
        pos = m.end
    out.append(text[pos:r.end])
    return " ".join(re.sub(r"(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9])", "<L>", "".join(out)).lower().split())


def _said_of_another(text: str, last: Sentence, roles: list[Sentence], index: OptionIndex) -> bool:
    """The closing sentence repeats, word for word, what an earlier one said of another option."""
    masked = _masked(text, last, index)
    return any(r.letter not in (None, last.letter) and _masked(text, r, index) == masked for r in roles if r is not last)


def _in_option_list(text: str, s: int, index: OptionIndex) -> bool:
    """The sentence is a line of an option list ("A. ball\nB. box"): a line above or below opens
    with another option, or both it and a neighbour open with a letter label ("(C) yes\n(D) no")."""
    line_start = text.rfind("\n", 0, s) + 1
    line_end = text.find("\n", s)
    neighbours = []
    if line_start > 0:
        neighbours.append(text.rfind("\n", 0, line_start - 1) + 1)
    if line_end >= 0 and (m := re.compile(r"\n\s*(?=\S)").match(text, line_end)):
        neighbours.append(m.end())
    if not neighbours:
        return False
    if _ANY_LABEL.match(text, line_start) and any(_ANY_LABEL.match(text, n) for n in neighbours):
        return True
    here = list_letter(text, line_start, index)
    return bool(here) and any(list_letter(text, n, index) not in (None, here) for n in neighbours)


def _echo(text: str, s: int, e: int, index: OptionIndex) -> bool:
    """The sentence only repeats an option of the prompt's list ("(A) the second image")."""
    m = index.mentions(text, s, e)
    return (len(m) == 1 and m[0].kind == "label" and not text[s:m[0].start].strip(" \t\n-•*>")
            and not text[m[0].end:e].strip(" \t\n.;,") and _in_option_list(text, s, index))


def read_sentence(text: str, start: int, index: OptionIndex) -> str | None:
    """A one-sentence answer that asserts one option with a judgement ("Point A, on the car, is closer")."""
    spans = _spans(text, start)
    if len(spans) != 1:
        return None
    only = classify(text, *spans[0], index)
    if only is None or not (only.role == "assert" or (only.role == "compare" and only.evaluative)):
        return None
    return only.letter if only.evaluative or _COUNT.search(text, *spans[0]) else None


def _same_run(claim: Sentence, later: list[Sentence]) -> list[Sentence]:
    """The claim and the sentences after it up to the first that names another option."""
    run = [claim]
    for r in later:
        if set(r.named) - {claim.letter}:
            break
        run.append(r)
    return run


def _rejects(text: str, r: Sentence, index: OptionIndex) -> bool:
    """What the sentence goes on to say of its option is negative ("..., which is a different setting",
    "..., but does not enclose the laptop"); a negation of another option ("not the second image") is not."""
    first = next((m for m in index.mentions(text, r.main, r.end) if m.letter == r.letter), None)
    if first is None:
        return False
    for neg in _NEGATIVE.finditer(text, first.end, r.end):
        after = re.compile(r"[\s(\[]*(?:the\s+|option\s+|choice\s+)?").match(text, neg.end()).end()
        if not (index.text_at(text, after) or re.compile(r"[A-Z](?![A-Za-z0-9])").match(text, after)):
            return True
    return False


def read_stance(text: str, start: int, index: OptionIndex) -> Stance | None:
    """The option the answer text[start:] asserts, by its claim and its conclusion.

    Returns None when no sentence asserts anything (the caller's later rules may still read a
    lone mention), Stance(None, "conflict") when the answer cannot tell or contradicts itself.
    """
    spans = _spans(text, start)
    roles = [r for s, e in spans if (r := classify(text, s, e, index)) is not None and not _echo(text, s, e, index)]
    if not roles or (len(spans) == 1 and not (start or roles[0].cue)):
        return None  # a one-sentence answer: the lone-mention rules read it first (see read_sentence)

    def asserts(r: Sentence) -> bool:
        if r.role == "compare":
            return r.cue or r.evaluative  # "so A is closer, while B ...", "A is closer, while B ..."
        return r.role == "assert" and (r.cue or not _rejects(text, r, index))

    claim = next((r for r in roles if asserts(r) and not _in_option_list(text, r.start, index)), None)
    # The conclusion: the last sentence that asserts an option, when it closes the answer.
    last = next((r for r in reversed(roles) if asserts(r)), None)
    conclusion = None
    if (last is not None and (last.cue or (last.start >= spans[max(0, len(spans) - 3)][0] and not _ADDITION.match(
            text, last.start, last.end) and not any(
            r.role == "contrast" and set(r.named) - {last.letter} for r in roles if r.start > last.start)))
            and not EQUAL.search(text, last.start, last.end) and not _in_option_list(text, last.start, index)):
        conclusion = last.letter
        i = roles.index(last)
        if i > 0 and (not last.cue or roles[i - 1].cue):
            prev = roles[i - 1]
            if ((prev.letter not in (None, last.letter) and prev.role in ("assert", "reject", "compare")
                    and _shape(text, prev.start, index) == _shape(text, last.start, index))
                    or _said_of_another(text, last, roles, index)):
                conclusion = None  # "Point A is on the table. Point B is on the wall."
    if claim is None:
        if conclusion is None:
            return Stance(None, "conflict") if any(asserts(r) for r in roles) else None
        return Stance(conclusion, "closing", last.start)
    if conclusion == claim.letter:
        return Stance(conclusion, "claim" if last is claim else "closing", last.start)
    # A claim states the choice when it concludes ("so ...") or opens the answer with a judgement
    # ("Box A fits most closely"); otherwise it may be one description of a series.
    later = [r for r in roles if r.start > claim.start]
    strong = claim.cue or (claim.start == spans[0][0]
                           and (claim.bare or any(r.evaluative for r in _same_run(claim, later))))
    # Against a judgement that opens the answer, only another judgement competes ("The third image is a
    # city street." describes; "The third image is more similar." judges).
    if any(asserts(r) and r.letter != claim.letter and not r.cue and (r.evaluative or not strong) for r in later):
        # One of a series of descriptions ("Point A is ... Point B is ..."): the conclusion decides.
        return Stance(conclusion, "closing", last.start) if conclusion and not strong else Stance(None, "conflict")
    if conclusion is None:
        # A descriptive claim counts only when it opens the answer and no option is contrasted with it.
        opening = claim.start in (s for s, _ in spans[:2])
        if strong or (opening and not any(r.role == "contrast" and set(r.named) - {claim.letter} for r in later)):
            return Stance(claim.letter, "claim", claim.start)
        return Stance(None, "conflict")
    if last.cue and not strong:
        return Stance(conclusion, "closing", last.start)
    return Stance(None, "conflict")


def conclusion_after(text: str, pos: int, index: OptionIndex) -> str | None:
    """The option a concluding sentence ("Therefore, Box B ...") after ``pos`` asserts, if one does."""
    found = None
    for s, e in _spans(text, pos):
        r = classify(text, s, e, index)
        if r is not None and r.cue and r.evaluative and r.role in ("assert", "compare"):
            found = r.letter
    return found

