"""Where an answer names an option: by a letter label, by its text, or by a bare capital letter.

A *mention* is one place in the answer that names one of the sample's options. Letters that
label things rather than options ("image (C)", "point A" when no option is "Point A",
"images B and C") are not mentions; neither are negated ones ("not B", "A is wrong").
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from bench.constants import LETTERS
from eval.parser_text import OPTION_WORDS

NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
_DIGIT_WORDS = {d: w for w, d in NUMBER_WORDS.items()}
_ASCII_BEFORE, _ASCII_AFTER = r"(?<![A-Za-z0-9À-ÿ])", r"(?![A-Za-z0-9À-ÿ])"

# Nouns whose letter or number labels a thing in the images, not an option ("image C", "view 2");
# a plural one labels a list of them ("images B, C and D").
_THING_STEMS = ("point image picture photo photograph figure frame view camera mark marker label region object "
                "person circle dot img panel candidate crop").split()
THING = ("|".join(f"{w}s?" for w in _THING_STEMS) + r"|box(?:es)?|labell?ed|marked"
         r"|图片|圖片|图像|圖像|图|圖|画像|이미지|그림|imagen|bild|immagine|imagem|изображение|точка")
_PLURAL_THING = "|".join(f"{w}s" for w in _THING_STEMS) + "|boxes"
_THING_BEFORE = re.compile(
    rf"(?i:\b(?:{THING}))(?:[ \t]+as)?[ \t]*[\(\[\"']?[ \t]*\Z"
    rf"|(?i:\b(?:{_PLURAL_THING}|(?:labell?ed|marked|named|called)(?:[ \t]+as)?))[ \t]*,?[ \t]*[\(\[]?[ \t]*"
    r"(?:[\"']?[A-Z][\"']?[\)\]]?[ \t]*(?:,|and|or|&|/)[ \t]*(?:and[ \t]+|or[ \t]+)?[\(\[\"']?[ \t]*)*\Z")
_IMAGE_NOUNS = r"images?|pictures?|photos?|photographs?|img"
_ORDINALS = "first second third fourth fifth sixth seventh eighth".split()
_IMAGE_BEFORE = re.compile(r"(?i:\b(?:image|picture|photo|photograph|img))[ \t]*[\(\[]?[ \t]*\Z")
_OPTION_NOUN = r"options?|choices?|answers?|letters?|opci[oó]n|opzione|opção|вариант|选项|選項"
# Numbers after these are labels too; "mark 2" stays a number because marks can be options.
_NUMBER_LABEL_BEFORE = re.compile(r"(?i:\b(?:views?|images?|cameras?|frames?|pictures?|photos?|steps?|figures?|marked"
                                  r"|frame\s+labell?ed)|t\s*=|#)[ \t]*\Z")
# "the three views": a count of views or images, not of what the question asks about.
_COUNTS_VIEWS = re.compile(
    r"(?i)[ \t]+(?:different[ \t]+|distinct[ \t]+)?(?:views?|images?|cameras?|frames?|pictures?|photos?)\b")
_BULLET_NUMBER = re.compile(r"(?m)^[ \t]*\d+[.)][ \t]+(?=\S)")

_NEGATED_BEFORE = re.compile(
    r"(?i:(?:\bnot|n't|\bnever|\brather\s+than|\binstead\s+of|\bexcept(?:\s+for)?|\bexcluding|\bunlike"
    r"|\bother\s+than|\bthan|\bcompar(?:ing|ed\s+(?:to|with))|\bnor|\bneither|\brule\s+out|\bruled\s+out|\bruling\s+out|\beliminat\w*|\bexclude[sd]?"
    r"|\bagainst|\bno|\bwithout))"
    r"\s+(?:(?:the|option|choice|point|letter|answer|picture|image|is|be)\s+)*[\(\[\"']?\Z")
# What an option is compared with, up to the end of the clause: "compared to the circled area B".
_COMPARED_BEFORE = re.compile(
    r"(?i:\b(?:than|compared\s+(?:to|with)|comparing|unlike|as\s+opposed\s+to|relative\s+to|versus|vs\.?"
    r"|rather\s+than|instead\s+of|in\s+contrast\s+(?:to|with)|other\s+than|between))\b[^,;:.\n]{0,60}\Z")
# "the second or third image": the third image as one of a list, not on its own.
_ORDINAL_LIST_BEFORE = re.compile(r"(?i:\b(?:first|second|third|fourth|fifth|sixth))[ \t]*(?:,|or|and|&|/)[ \t]*\Z")
_NEGATED_AFTER = re.compile(
    r"(?i)^[\)\]\"'\s]*(?:(?:is|are|was|were|would\s+be|seems|seem|appears|appear|looks|look|can\s+be|could\s+be)\s+"
    r"(?:clearly\s+|also\s+|definitely\s+)?(?:not\b|n't\b|never\b)|[\s:\-–]*(?:(?:is|are|was|were|would\s+be|seems|seem"
    r"|appears|appear|looks|look|can\s+be|could\s+be)\s+)?(?:clearly\s+|also\s+|definitely\s+)?(?:incorrect\b|wrong\b"
    r"|unlikely\b|less\s+likely\b|ruled\s+out\b|excluded\b|eliminated\b|out\s+of\s+reach\b)|(?:doesn't|does\s+not|don't"
    r"|do\s+not|cannot|can't|isn't|aren't|wasn't|won't)\b)")
# "A" / "I" before a lower-case word is an article or a pronoun, unless that word can follow a letter.
_AFTER_LETTER_WORDS = set(
    "and or nor but is was are were seems seem looks look appears appear would could might should must will can may "
    "because since as then than vs versus also too with without fits fit matches match only has have shows show "
    "corresponds correspond contains depicts represents lies sits stands here there which that where while whereas "
    "due being does did do best instead".split())

_LABEL_PATTERNS = (
    re.compile(r"(?<![A-Za-z0-9])[\(\[]\s*([A-Za-z])\s*[\)\]]"),                           # (B) [b]
    re.compile(rf"(?i:(?<![A-Za-z])(?:{_OPTION_NOUN}))\s*[\(\[]?([A-Za-z])(?![A-Za-z0-9])"),  # option B, 选项B
    re.compile(r"(?m)^[ \t]*(?:[-•][ \t]*)?([A-Z])(?:[.):]|[ \t]+-)(?=\s|$)"),  # B. / B) / B: / B - opening a line
)
_SUBJECT_AFTER = re.compile(r"[\s,)\]\"']+(?:" + "|".join(sorted(_AFTER_LETTER_WORDS - {"and", "or", "nor"}))
                            + r")\b(?=[ \t]+\w)")
_LIST_BEFORE = re.compile(r"(?<![A-Za-z0-9'])([A-Z])'?[ \t]*(?:,|and|or|/)[ \t]*\Z")
_LIST_AFTER = re.compile(r"'?[ \t]*(?:,|and|or|/)[ \t]*([A-Z])(?![A-Za-z0-9])")
_BARE = re.compile(r"(?<![A-Za-z0-9'\-&])([A-Z])(?![A-Za-z0-9'\-&])")


@dataclass(frozen=True)
class Mention:
    """One place that names an option: ``kind`` is label, text or bare; [start, end) in the text."""
    letter: str
    kind: str
    start: int
    end: int


def _word_pattern(word: str) -> str:
    if word.isdigit():
        return f"(?:{word}|{_DIGIT_WORDS[word]})" if word in _DIGIT_WORDS else word
    if word in NUMBER_WORDS:
        return f"(?:{word}|{NUMBER_WORDS[word]})"
    return re.escape(word)


def _letter_subject(option: str) -> bool:
    """The option opens with a letter as its subject ("A is closer"), not with the article "A"."""
    m = re.match(r"\s*([A-Z])\s+([a-z]+)", option)
    return bool(m) and m.group(2) in _AFTER_LETTER_WORDS


def _option_pattern(option: str) -> re.Pattern | None:
    """A pattern for an option's text in an answer: case, punctuation and number words aside."""
    tokens = re.findall(r"[^\W_]+|[^\w\s]", option.lower())
    tokens = [t for t in tokens if not re.fullmatch(r"[!-/:-@\[-`{-~]", t)]  # ASCII punctuation is no part of it
    if not tokens:
        return None
    if tokens in (["none", "of", "the", "above"], ["none", "of", "these"]):
        return re.compile(r"(?i)\bnone\s+of\s+(?:the\s+above|these|the\s+(?:given\s+|listed\s+|provided\s+|other\s+)?"
                          r"(?:options|choices|answers))\b")
    if len(tokens) == 1 and re.fullmatch(r"[a-z]", tokens[0]):
        # An option that is a letter is named by "point A" / "mark A"; a bare "A" is the letter A.
        return re.compile(rf"(?i:\b(?:{THING}))\s*[\(\[]?{tokens[0].upper()}(?![A-Za-z0-9])")
    if tokens in (["yes"], ["no"]):
        # An answer word, not a determiner: "No, the cup is ..." / "the answer is no." (not "no car").
        return re.compile(rf"(?i)(?<![A-Za-z0-9]){tokens[0]}(?![A-Za-z0-9])(?![ \t]+[a-z])")
    if tokens[0] in ("the", "a", "an") and len(tokens) > 1 and not _letter_subject(option):
        head, tokens = r"(?:(?:the|a|an)\s+)?", tokens[1:]
    else:
        head = r"(?:(?:mark|marker|label|number|symbol)\s+)?" if len(tokens) == 1 else ""
    body = r"[\W_]+".join(_word_pattern(t) for t in tokens)
    before = _ASCII_BEFORE if re.match(r"[a-z0-9À-ÿ]", tokens[0]) or head else ""
    after = _ASCII_AFTER if re.search(r"[a-z0-9À-ÿ]$", tokens[-1]) else ""
    return re.compile(before + head + body + after, re.IGNORECASE)


# Between a subject letter and its predicate: an aside in commas, then linking words only
# ("point A, which is on the car, is clearly closer", "B appears to be slightly darker").
# Between a subject letter and its predicate: an aside, then a verb among linking words only
# ("point A, which is on the car, is clearly closer", "B appears to be slightly darker"; not "A closer look").
_LINKING = (r"to|be|being|been|indeed|clearly|definitely|certainly|actually|also|likely|probably|possibly|physically"
            r"|slightly|much|significantly|noticeably|visibly|relatively|somewhat|considerably|even|a|an|bit|little|lot"
            r"|more|far|the|one|that's|standing|sitting|lying|positioned|located|situated|placed|in|fact|surface|color"
            r"|colour|albedo")
_VERB = r"is|are|was|were|has|have|had|appears?|seems?|looks?|would|should|must|may|might|could|will"
_SUBJECT_GAP = (rf"(?:[ \t]*,[^,.;:\n]{{1,60}},|[ \t]+(?:which|that|who)[ \t][^,.;:\n]{{1,60}}?(?=[ \t]+(?:{_VERB})\b))?"
                rf"(?:[ \t]+(?:{_LINKING}))*[ \t]+(?:{_VERB})(?:[ \t]+(?:{_VERB}|{_LINKING}))*[ \t]+")


def _subject_patterns(options: list[str]) -> list[tuple[int, re.Pattern]]:
    """Options that differ only in their subject letter ("A is closer" / "B is closer") are also named
    by that letter as the subject of their shared predicate: "point A appears to be closer", "A, which
    is on the car, is closer". Not across another option's letter, a "than" or a negation."""
    shapes = []
    for i, option in enumerate(options):
        m = re.fullmatch(r"\s*([A-Z])\s+([a-z]+)\s+(.+?)\s*\.?", option)
        shapes.append((m.group(1), m.group(3).lower()) if m and m.group(2) in _AFTER_LETTER_WORDS else None)
    out = []
    for i, shape in enumerate(shapes):
        if shape is None:
            continue
        rivals = [x[0] for j, x in enumerate(shapes) if j != i and x is not None and x[1] == shape[1] and x[0] != shape[0]]
        if not rivals:
            continue
        gap = _SUBJECT_GAP
        body = r"[\W_]+".join(_word_pattern(t) for t in re.findall(r"[^\W_]+", shape[1]))
        pattern = rf"(?<![A-Za-z0-9'])(?-i:{shape[0]})[\"')\]]?" + gap + rf"\b{body}{_ASCII_AFTER}"
        out.append((i, re.compile(pattern, re.IGNORECASE)))
    return out


def _norm(text: str) -> str:
    words = re.findall(r"[^\W_]+|[^\w\s]", text.lower())
    return " ".join(NUMBER_WORDS.get(w, w) for w in words if not re.fullmatch(r"[!-/:-@\[-`{-~]", w))


class OptionIndex:
    """The options of one sample, ready to be found in answers.

    Args:
        options: the option texts as shown to the model; their letters are the valid ones.
    """

    def __init__(self, options: list[str]):
        self.letters = LETTERS[: len(options)]
        self.norms = [_norm(o) for o in options]
        self.longest = 3 * max((len(o) for o in options), default=0) + 40
        # Longest first: "left hand" claims its span before "left".
        order = sorted(range(len(options)), key=lambda i: -len(self.norms[i]))
        self.patterns = [(self.letters[i], p) for i in order if (p := _option_pattern(options[i])) is not None]
        subjects = _subject_patterns(options)
        self.patterns += [(self.letters[i], p) for i, p in subjects]
        # With options "A is closer" / "B is closer", a bare "B" names point B, not an option.
        self.bare_letters = not subjects
        # Options "the first image", "the second image", ... in order: "image (B)" names option B either way.
        self.images_in_order = len(options) > 1 and all(
            re.fullmatch(rf"(?:the\s+)?{_ORDINALS[i]}\s+(?:{_IMAGE_NOUNS})", o.strip(), re.IGNORECASE)
            for i, o in enumerate(options))
        self.foreign = [(self.letters[i], re.compile(rf"\s*(?:{OPTION_WORDS[n]})(?:[.!。！,，、;；:：]|\s*$|[ \t]*\n)",
                                                     re.IGNORECASE))
                        for i, n in enumerate(self.norms) if n in OPTION_WORDS]
        self._memo: dict[str, list[Mention]] = {}

    def whole(self, text: str) -> str | None:
        """The letter whose option text is the whole answer ("3", "Right hand", "②"), or whose
        option word in another language opens it on its own ("左", "はい、...", "Nein.")."""
        hits = []
        if len(text) <= self.longest:  # a long answer is no option text (and _norm of it is slow)
            norm = _norm(text)
            hits = [self.letters[i] for i, n in enumerate(self.norms) if n and n == norm]
        if not hits and self.foreign:
            hits = [letter for letter, pattern in self.foreign if pattern.match(text)]
        return hits[0] if len(hits) == 1 else None

    def text_at(self, text: str, pos: int) -> Mention | None:
        """The option text that starts at ``pos`` (after an optional article), if any."""
        for letter, pattern in self.patterns:
            m = pattern.match(text, pos)
            if m and not _number_is_label(text, m):
                return Mention(letter, "text", m.start(), m.end())
        return None

    def mentions(self, text: str, start: int = 0, end: int | None = None) -> list[Mention]:
        """Every non-negated mention of an option that lies within text[start:end], in order of position.

        The answer is searched once; a span gets the mentions that lie inside it.
        """
        if text not in self._memo:  # the rules ask for many spans of one answer
            self._memo[text] = self._find(text, 0)
        found = self._memo[text]
        end = len(text) if end is None else end
        if start <= 0 and end >= len(text):
            return found
        lo = bisect.bisect_left(found, start, key=lambda m: m.start)
        out = []
        for m in found[lo:]:
            if m.start >= end:
                break
            if m.end <= end:
                out.append(m)
        return out

    def _find(self, seg: str, start: int) -> list[Mention]:
        found: list[Mention] = []
        taken = bytearray(len(seg))  # characters already inside a longer mention
        for letter, pattern in self.patterns:
            for m in pattern.finditer(seg, start):
                if any(taken[m.start():m.end()]) or _number_is_label(seg, m):
                    continue
                taken[m.start():m.end()] = b"\1" * (m.end() - m.start())
                found.append(Mention(letter, "text", m.start(), m.end()))
        for pattern in _LABEL_PATTERNS:
            for m in pattern.finditer(seg, start):
                letter = m.group(1).upper()
                if letter in self.letters and not taken[m.start(1)] and not self._thing_label(seg, m.start()):
                    taken[m.start(1)] = 1
                    found.append(Mention(letter, "label", m.start(), m.end()))
        for m in _BARE.finditer(seg, start):
            letter = m.group(1)
            if not self.bare_letters and _SUBJECT_AFTER.match(seg, m.end()):
                continue  # with options "A is closer" / "B is closer", "B is further back" names point B
            if (letter in self.letters and not taken[m.start()] and not self._symbol(seg, m.start(), m.end())
                    and not is_article(seg, m.start(), m.end()) and not self._thing_label(seg, m.start())):
                found.append(Mention(letter, "bare", m.start(), m.end()))
        found = _pair_labels_with_texts(sorted(found, key=lambda x: x.start), seg)
        return [x for x in found if not negated(seg, x)]


    def _symbol(self, text: str, start: int, end: int) -> bool:
        """The letter is one of a list of other capitals ("(R, G, B)", "x, y and Z"): a symbol, not an option."""
        before = _LIST_BEFORE.search(text, max(0, start - 8), start)
        after = _LIST_AFTER.match(text, end)
        return any(m and m.group(1) not in self.letters for m in (before, after))

    def _thing_label(self, text: str, pos: int) -> bool:
        """The letter at ``pos`` labels a thing, not an option (images are options when in order)."""
        if not _thing_label(text, pos):
            return False
        return not (self.images_in_order and _IMAGE_BEFORE.search(text, max(0, pos - 80), pos))


def _thing_label(text: str, pos: int) -> bool:
    """The letter at ``pos`` follows a thing noun ("image (C)", "images B and C"): 80 characters suffice."""
    return bool(_THING_BEFORE.search(text, max(0, pos - 80), pos))


def _number_is_label(text: str, m: re.Match) -> bool:
    """A number that names a view, step or frame, counts views, is a list bullet, or "one" as a pronoun."""
    word = m.group(0).lower()
    if (word.isdigit() or word in NUMBER_WORDS) and _COUNTS_VIEWS.match(text, m.end()):
        return True
    if re.fullmatch(r"\d+", word):
        if _NUMBER_LABEL_BEFORE.search(text, max(0, m.start() - 40), m.start()):
            return True
        line_start = text.rfind("\n", 0, m.start()) + 1
        if _BULLET_NUMBER.match(text, line_start) and re.match(r"[.)]", text[m.end():m.end() + 1]):
            return True
        if re.match(r"\d[.,]", text[max(0, m.start() - 2):m.start()]) or re.match(r"[.,]\d", text[m.end():m.end() + 2]):
            return True
    if word == "one":
        if re.search(r"(?i)\b(?:the|this|that|which|each|any|no|every|another|other|someone|anyone)\s+\Z",
                     text[max(0, m.start() - 12):m.start()]):
            return True
        if re.match(r"\s+(?:of|another)\b", text[m.end():], re.IGNORECASE):
            return True
    return False


def is_article(text: str, start: int, end: int) -> bool:
    """A capital A / I before a lower-case word ("A person ...") is an article or pronoun."""
    letter = text[start:end]
    if letter not in "AaIi":
        return False
    following = re.match(r"[ \t]+([a-z]+)", text[end:end + 30])
    if following is not None:
        return following.group(1) not in _AFTER_LETTER_WORDS
    titled = re.match(r"[ \t]+([A-Z][a-z]+)", text[end:end + 30])  # "A Pot", "A Peasant Family": a title
    return titled is not None and titled.group(1).lower() not in _AFTER_LETTER_WORDS


def negated(text: str, mention: Mention) -> bool:
    """The mention is denied: "not B", "rather than the box", "A is wrong", "point B isn't"."""
    clause_start = max([text.rfind(c, 0, mention.start) for c in ",;:\n."] + [mention.start - 80]) + 1
    return bool(_NEGATED_BEFORE.search(text, clause_start, mention.start)
                or _COMPARED_BEFORE.search(text, clause_start, mention.start)
                or _ORDINAL_LIST_BEFORE.search(text, max(0, mention.start - 20), mention.start)
                or _NEGATED_AFTER.match(text[mention.end:mention.end + 60]))


def _pair_labels_with_texts(found: list[Mention], text: str) -> list[Mention]:
    """"(A) the second image" and "the box (B)" name one option each: the label's, spanning both."""
    out: list[Mention] = []
    for m in found:
        prev = out[-1] if out else None
        if prev is not None and re.fullmatch(r"[ \t.:)\-]*", text[prev.end:m.start]):
            if prev.kind == "label" and m.kind == "text" and m.letter == prev.letter:
                out[-1] = Mention(prev.letter, "label", prev.start, m.end)
                continue
            if prev.kind == "text" and m.kind == "label" and m.letter == prev.letter and text[m.start] in "([":
                out[-1] = Mention(m.letter, "label", prev.start, m.end)
                continue
        out.append(m)
    return out
