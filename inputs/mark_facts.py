"""What each mark's own view shows of the marked person, as per-mark training targets.

The synthetic generator records, per mark of a static scene, the class ids of
``bench.synth.captions.person_facts`` in ``meta["mark_facts"]`` (``bench.entities.MARK_FACT_KEYS``:
shirt and trouser colour, hat, posture, each arm's state, the kind of object touched; -1 where the
view does not show it).
``mark_fact_targets`` turns that record into one row of ``len(FACTS)`` classes per mark of a
view set, the supervision of the model's mark-fact head (``model.entity.fact_head``,
``loss.mark_facts``), read from the *training* split only. Each class is named by the words the
questions and options use for it (``FACTS``): the head scores a mark token against those words'
LM embeddings, so the answer's words learn what they look like from every mark, not only from
the ~2,000 answers. Benchmarks without the record give IGNORE everywhere.
"""
from __future__ import annotations

from typing import Optional

import torch

from bench.entities import ARM_CLASSES, COLOUR_NAMES, HAT_NAMES, MARK_FACT_KEYS, OBJECT_KINDS, POSTURES
from bench.entities import IGNORE as NOT_SHOWN
from bench.synth.tasks_mvn import ARM_TEXT  # the limb questions' phrasing (not schema): to be moved
from inputs.track import IGNORE

# (fact, the words of each of its classes), in MARK_FACT_KEYS order; class i of a fact is index i
# of its bench.entities list (HAT_NAMES, ARM_CLASSES, ...), contact_kind 0 = touching nothing.
_ARM_WORDS = [ARM_TEXT.get(state, state) for state in ARM_CLASSES]  # the limb questions' phrasing
FACTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("shirt", tuple(COLOUR_NAMES)),
    ("trousers", tuple(COLOUR_NAMES)),
    ("hat", tuple("no hat" if h == "none" else f"{h} hat" for h in HAT_NAMES)),
    ("posture", tuple(p.replace("_", " ") for p in POSTURES)),
    ("arm_l", tuple(_ARM_WORDS)),
    ("arm_r", tuple(_ARM_WORDS)),
    ("contact_kind", ("nothing",) + tuple(OBJECT_KINDS)),
)
assert tuple(name for name, _ in FACTS) == MARK_FACT_KEYS


def fact_words() -> list[str]:
    """Every class's words, the facts' classes one after another (the head's class order)."""
    return [words for _, classes in FACTS for words in classes]


def fact_sizes() -> list[int]:
    """Classes per fact (ModelConfig's entity.fact_sizes)."""
    return [len(classes) for _, classes in FACTS]


def mark_fact_row(facts: Optional[dict]) -> list[int]:
    """One mark's record -> its class per fact (IGNORE where the view does not show it, or unknown)."""
    if not facts:
        return [IGNORE] * len(FACTS)
    row = [int(facts.get(name, NOT_SHOWN)) for name, _ in FACTS]
    return [IGNORE if c == NOT_SHOWN else c for c in row]


def mark_fact_table(meta: Optional[dict], n_marks: int) -> torch.Tensor:
    """(n_marks, len(FACTS)) long: each of a sample's marks' classes, IGNORE without a record.

    Raises:
        ValueError: the record lists another number of marks than the sample has.
    """
    record = (meta or {}).get("mark_facts")
    if record is None:
        return torch.full((n_marks, len(FACTS)), IGNORE, dtype=torch.long)
    if len(record) != n_marks:
        raise ValueError(f"meta.mark_facts lists {len(record)} marks, the sample has {n_marks}")
    return torch.tensor([mark_fact_row(r) for r in record], dtype=torch.long).view(n_marks, len(FACTS))
