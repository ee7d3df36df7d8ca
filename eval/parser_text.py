"""Text helpers of the answer parser: cleaning, sentences, and the cue words the rules read.

The cue lists are English first, with the common forms of Chinese, Japanese, Korean, French,
Spanish, German, Italian, Portuguese and Russian answers (the option letters stay Latin).
"""
from __future__ import annotations

import re
from functools import lru_cache

# Full-width ASCII (common in CJK answers: "（B）", "Ｂ", "：") as ASCII; curly quotes as straight.
_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20, 0x2018: 0x27, 0x2019: 0x27,
                                                            0x201C: 0x22, 0x201D: 0x22, 0x3001: 0x2C}
# A tokenizer's special tokens left in a decoded answer ("<s> A", "no</s>").
_SPECIAL_TOKENS = re.compile(r"</?s>|<\|[a-z_]{2,20}\|>|</?eos>|\[/?INST\]", re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{)?([^{}]*?)\}?\s*\}")
# "N/A" reads as a letter A otherwise; it means the model gives no option.
_NOT_APPLICABLE = re.compile(r"(?<![A-Za-z0-9])n\s*/\s*a(?![A-Za-z0-9])", re.IGNORECASE)
# "E.g." would be a letter E of a 5-option prompt.
_ABBREVIATIONS = ((re.compile(r"(?<![A-Za-z])e\.\s?g\.", re.IGNORECASE), "for example"),
                  (re.compile(r"(?<![A-Za-z])i\.\s?e\.", re.IGNORECASE), "that is"))


def clean(text: str) -> str:
    """Drop reasoning tags, Markdown emphasis and headings, "N/A" and "e.g."; keep line breaks.

    Args:
        text: a model's raw answer.
    Returns:
        the text the rules read (same language, same line structure).
    """
    text = _SPECIAL_TOKENS.sub(" ", text.translate(_WIDTH))
    after_think = _THINK.sub("", text).strip()
    text = after_think or re.sub(r"</?think>", " ", text, flags=re.IGNORECASE)
    text = _BOXED.sub(lambda m: f" answer: {m.group(1)} ", text)
    text = re.sub(r"\*\*|__|`|\*", "", text)
    text = re.sub(r"(?m)^[ \t]*#{1,6}[ \t]*", "", text)
    text = _NOT_APPLICABLE.sub("not applicable", text)
    for pattern, words in _ABBREVIATIONS:
        text = pattern.sub(words, text)
    return text.strip()


# A sentence ends at a line break, at CJK end punctuation, or at . ! ? followed by a space;
# "B. 3" keeps its label (a lone letter before the full stop is not a sentence).
_SENTENCE_END = re.compile(r"\n+|[。！？]+|(?<![.!?])[.!?]++(?:[\"')\]]*)(?=\s)")  # a run of dots is tried once
_LONE_LABEL = re.compile(r"^\s*[\(\[]?[A-Za-z][\)\]]?\s*$")


@lru_cache(maxsize=16)  # the rules ask for the sentences of one answer many times
def sentences(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) spans of the sentences of ``text``, in order, without empty ones."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        if m.group(0)[0] == "." and _LONE_LABEL.match(text[start:m.start()]):
            continue
        spans.append((start, m.end()))
        start = m.end()
    spans.append((start, len(text)))
    return tuple((s, e) for s, e in spans if text[s:e].strip(" \t\n.!?。！？"))


def words(text: str) -> int:
    """Number of words (a CJK character counts as a word)."""
    return len(re.findall(r"[A-Za-z0-9À-ÿ'\-]+|[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]", text))


def _cue(*alternatives: str) -> re.Pattern:
    return re.compile("|".join(alternatives), re.IGNORECASE)


# The answer says it cannot or will not choose (after it, only a later conclusion counts).
HEDGE = _cue(
    r"\bnot\s+(?:\w+\s+)?possible\s+to", r"\bimpossible\s+to",
    r"\bcan\s*not\s+be\s+"
    r"(?:determined|told|said|answered|decided|known|inferred|identified|confirmed|seen|established)",
    r"\b(?:can\s*not|can't|could\s*not|couldn't)\s+(?:\w+\s+)?"
    r"(?:determine|tell|say|decide|answer|be\s+(?:sure|certain)|identify|see|count|know|infer|confirm|help|view|judge)",
    r"\bunable\s+to",
    r"\bnot\s+(?:entirely\s+|completely\s+|totally\s+|quite\s+|100%\s+)?(?:sure|certain|clear|determinable)",
    r"\bunclear", r"\buncertain", r"\bunsure",
    r"\b(?:hard|difficult|tough|challenging)\s+(?:for\s+(?:me|us)\s+)?to\s+(?:\w+ly\s+)?"
    r"(?:tell|say|determine|know|judge|decide|be\s+sure|pick|choose|answer|distinguish|identify|conclude"
    r"|provide\s+a\s+definitive|give\s+a\s+definitive|make\s+a\s+definitive)",
    r"\b(?:purely|merely|highly|only)\s+speculative",
    r"\bno\s+way\s+to", r"\binsufficient", r"\bnot\s+enough\s+(?:information|detail|details|evidence|context)",
    r"\bneed\s+more\s+(?:information|context|detail)", r"\b(?:don't|do\s+not)\s+know", r"\bambiguous",
    r"\bnot\s+applicable", r"\bneither\b",
    r"\bnone\s+of\s+(?:the|these|those)\s+(?:\w+\s+)?(?:points|images|pictures|options|choices|boxes)",
    r"无法|無法|不确定|不確定|不能确定|难以|難以|不清楚|都有可能|判断できません|わかりません|分かりません|判別できません",
    r"판단할\s*수\s*없|알\s*수\s*없|확실하지\s*않",
    r"je\s+ne\s+(?:peux|sais)\s+pas", r"impossible\s+de", r"no\s+se\s+puede", r"no\s+es\s+posible", r"no\s+puedo",
    r"no\s+s[ée]\b", r"nicht\s+(?:möglich|eindeutig|sicher|erkennbar)", r"kann\s+(?:ich\s+)?(?:das\s+)?nicht",
    r"non\s+è\s+possibile", r"non\s+posso", r"não\s+é\s+possível", r"não\s+posso",
    r"невозможно", r"нельзя", r"не\s+могу", r"не\s+ясно")

# The answer declines: a "but" right after it ("I'm sorry, but I ...") turns nothing; only a later sentence may.
REFUSAL = _cue(r"\bI'?m\s+sorry", r"\bI\s+am\s+sorry", r"\bI\s+apologi[sz]e", r"\bas\s+an\s+AI\b",
               r"\b(?:do\s+not|don't)\s+feel\s+comfortable", r"\bI\s+(?:can\s*not|can't)\s+(?:assist|help\s+with)")

# A choice made tentatively: the read is a guess.
TENTATIVE = _cue(r"\b(?:might|may|possibly|perhaps|probably|could\s+be|educated\s+guess|best\s+guess|my\s+guess"
                 r"|if\s+I\s+(?:had|have|were)\s+to|tentative\w*|speculat\w*|not\s+(?:entirely\s+|completely\s+)?"
                 r"(?:sure|certain))\b", r"可能|也许|大概|かもしれ|おそらく|아마", r"\bpeut-être\b", r"\bquizás?\b",
                 r"\bvielleicht\b", r"\btalvez\b", r"\bвозможно\b")

# Several candidates given as equals ("both look", "either ... or", "equally likely").
EQUAL = _cue(
    r"\bboth\s+(?:\w+ly\s+)?"
    r"(?:look|seem|appear|fit|match|share|have|show|could|might|may|work|possible|plausible|correct|equally)",
    r"\bboth\s+(?:\w+\s+)?(?:are|is)\s+"
    r"(?:equally|possible|plausible|correct|likely|valid|reasonable|real|at\s+the\s+same)",
    r"\b(?:could|might|may|can)\s+be\s+either", r"\beither\s+(?:\S+\s+){0,5}?or\b", r"\bequally\b",
    r"\b(?:at|of)\s+(?:about\s+|roughly\s+)?the\s+same\s+(?:depth|distance)")

# After a hedge, a conclusion may still follow ("hard to tell at first, but ...").
OVERRIDE = _cue(r"\b(?:but|however|nevertheless|nonetheless|still|that\s+said|even\s+so|yet)\b",
                r"但是|但|不过|不過|しかし|하지만", r"\bmais\b", r"\bpero\b", r"\baber\b", r"\bno\s+entanto\b",
                r"\bоднако\b", r"\bно\b")

# The clause after one of these is the answer's conclusion.
CONCLUSION = _cue(r"\b(?:so|therefore|thus|hence|consequently|accordingly|overall|in\s+conclusion|in\s+summary"
                  r"|to\s+conclude|ultimately|as\s+a\s+result|which\s+means|this\s+means|that\s+means|meaning"
                  r"|conclusion|in\s+total|total(?=\s*(?:=|:|is\b|are\b|count))|altogether|to\s+summari[sz]e|all\s+in\s+all|in\s+short|in\s+the\s+end|given\s+(?:this|these|that|the\s+above)"
                  r"|based\s+on\s+(?:this|these|that|the\s+above|my|our|all|the\s+(?:above|analysis|observations?|comparison"
                  r"|evidence|reasoning|factors|details\s+above)))\b", r"所以|因此|因而|よって|したがって|따라서", r"\bdonc\b", r"\bpor\s+lo\s+tanto\b",
                  r"\bdaher\b", r"\bquindi\b", r"\bportanto\b", r"\bпоэтому\b", r"\bитак\b")

# Closing courtesies carry no choice; the sentence before them closes the answer.
BOILERPLATE = _cue(r"^\s*(?:I\s+hope\s+this|hope\s+this|let\s+me\s+know|feel\s+free|if\s+you\s+have|please\s+let)")

# In the sentence before a statement: the statement is reported, not made ("whether the answer is A").
HYPOTHETICAL = _cue(r"\b(?:whether|impossible|cannot|can't|unable|not\s+sure|unsure|unclear|not\s+possible|hard\s+to"
                    r"|difficult\s+to|don't\s+know|might\s+think|could\s+argue|one\s+might|you\s+might|if\s+you"
                    r"|suppose|assuming)\b")

# Option words a model answers in its own language ("左", "はい", "Nein."): English option -> the word
# in Chinese, Japanese, Korean, Spanish, French, German, Italian, Portuguese and Russian.
OPTION_WORDS = {
    "yes": "yes|是|是的|对|對|有|はい|ええ|예|네|sí|si|oui|ja|sim|sì|да",
    "no": "no|否|不|不是|没有|沒有|不对|不對|いいえ|아니요|아니오|아니|non|nein|não|nao|нет",
    "left": "左|向左|左边|左邊|左側|左侧|左へ|왼쪽|izquierda|a\\s+la\\s+izquierda|gauche|à\\s+gauche|links|nach\\s+links"
            "|esquerda|à\\s+esquerda|sinistra|a\\s+sinistra|влево|налево|слева",
    "right": "右|向右|右边|右邊|右側|右侧|右へ|오른쪽|derecha|a\\s+la\\s+derecha|droite|à\\s+droite|rechts|nach\\s+rechts"
             "|direita|à\\s+direita|destra|a\\s+destra|вправо|направо|справа",
}

