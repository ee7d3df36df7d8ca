"""Option-set builders for the temporal tasks (``tasks_temporal``): option sets whose listed
values each single view leaves ambiguous, so that no single view resolves the question.

``per_view``: per view, the answer values still possible for someone who sees only that view.
"""
from __future__ import annotations

from bench.synth import verify_temporal as vt
from bench.synth.blind import option_prior_keys, structure_signature
from bench.synth.options import N_LISTED


def ambiguous_pick(truth: str, order: list[str], per_view: list[set], k: int, listed: list[str]) -> list[str]:
    """Up to ``k`` distractors from ``order`` (in preference order) that keep single views undecided.

    ``per_view``: per view, the answer values still possible for someone who sees only that
    view. A view that leaves only the truth among the listed values would settle the question
    alone (no SVI), and one that leaves two gives a single-view guesser even odds; so each
    pick is the value that most views still allow, each view weighted by 1 / (listed values
    it still allows): the most settled views first; ties go to the earlier value in ``order``.
    """
    listed, chosen = list(listed), []
    pool = [v for i, v in enumerate(order) if v != truth and v not in listed and v not in order[:i]]
    while len(chosen) < k and pool:
        left = [len(s & set(listed)) or 1 for s in per_view]
        score = [sum(1.0 / n for s, n in zip(per_view, left) if v in s) for v in pool]
        best = max(range(len(pool)), key=lambda i: (score[i], -i))
        chosen.append(pool.pop(best))
        listed.append(chosen[-1])
    return chosen


def cover_options(truth: str, typed: list[tuple[str, str]], pool: list[str], per_view: list[set], rng,
                  nota_answer: bool, fill_type: str, keep_order: bool = False):
    """``categorical_options`` with distractors picked by ``ambiguous_pick`` (typed ones first
    on ties, then the pool in a seeded order); None when fewer than four values exist."""
    listed: list[str] = [] if nota_answer else [truth]
    kinds = {v: k for v, k in reversed(typed)}
    if keep_order:  # the pool is in order of preference
        order = [v for v, _ in typed] + list(pool)
    else:
        order = [v for v, _ in typed] + [pool[i] for i in rng.permutation(len(pool))]
    chosen = ambiguous_pick(truth, order, per_view, N_LISTED - len(listed), listed)
    if len(listed) + len(chosen) < N_LISTED:
        return None
    return listed + chosen, {v: kinds.get(v, fill_type) for v in chosen}


def grid_options(start: str, end: str, others: list[str], per_view: list[set], rng, nota: bool):
    """Trajectory options as a 2 x 2 grid: two starts x two ends ({X, C} x {Y, D}).

    Every start and every end is shared by exactly two options, so no option is the
    "consensus" one (with "X -> Y, Y -> X, X -> C, C -> Y" the answer was the only option whose
    start and end both recur); a camera that saw one end of the walk still leaves two
    options. C and D are the first pair (in a seeded order) that leaves every single view at
    least two listed options. "None of the above": the grid {X, C} x {D, D'} (no Y).
    Needs 4 objects (5 for "None of the above"); else None.
    """
    sets = grid_option_sets(start, end, others, per_view, rng, nota, 1)
    return sets[0] if sets else None


def grid_option_sets(start: str, end: str, others: list[str], per_view: list[set], rng, nota: bool,
                     k: int) -> list[tuple[list[str], dict[str, str]]]:
    """Up to ``k`` grids of ``grid_options``: the first ``k`` pairs (C, D) in the seeded order
    that leave every single view two or more options (alternatives for selection, as in
    ``twin_option_sets``), or else the first pair alone."""
    pairs = [(c, d) for c in others for d in others if c != d] if not nota else \
        [(c, (d, e)) for c in others for d in others for e in others if len({c, d, e}) == 3 and d < e]
    out, first = [], None
    for i in rng.permutation(len(pairs)):
        c, d = pairs[int(i)]
        if nota:
            listed = [vt.path_text(a, b) for a in (start, c) for b in d]
            types = {v: "wrong_end" if v.startswith(f"from the {start} ") else "wrong_landmark" for v in listed}
        else:
            listed = [vt.path_text(a, b) for a in (start, c) for b in (end, d)]
            types = {listed[1]: "wrong_end", listed[2]: "wrong_start", listed[3]: "wrong_landmark"}
        first = first or (listed, types)
        if all(len(v & set(listed)) >= 2 for v in per_view):
            out.append((listed, types))
            if len(out) == k:
                break
    return out or ([first] if first else [])


def twin_options(truth: str, pool: list[str], per_view: list[set], kinds: dict[str, str], rng, fill_type: str):
    """Motion options chosen so that the answer's *form* matches other options'.

    Distractors picked by what single views leave open share the answer's first action (seen
    by one side's cameras) and its last (seen by the other's), so the answer was the option
    whose parts recur ("consensus"; a probe on option shape alone got 73 %). Here every set of
    3 distractors from ``pool`` that leaves each single view two or more listed options is a
    candidate; the chosen one maximises how many other options have exactly the answer's
    structural signature (``blind.structure_signature``: number of actions, which slots
    other options share, overlap rank), then the fewest listed options any view leaves, ties
    in a seeded order. Sets where all four options look alike carry no option prior at all;
    the rest are balanced per signature in selection (``balance.OPTION_KEYS``).
    Returns None when no set keeps every single view undecided.
    """
    sets = twin_option_sets(truth, pool, per_view, kinds, rng, fill_type, 1)
    return sets[0] if sets else None


def twin_option_sets(truth: str, pool: list[str], per_view: list[set], kinds: dict[str, str], rng, fill_type: str,
                     k: int) -> list[tuple[list[str], dict[str, str]]]:
    """The ``k`` best option sets of ``twin_options``, best first (fewer when fewer exist).

    The later ones are alternatives for selection: when the best set would push an option
    key (an action at some position, a signature) off chance, ``balance.select`` may use the
    next one instead (``Candidate.make_options``).
    """
    from itertools import combinations
    scored = []
    order = [pool[i] for i in rng.permutation(len(pool))]
    for n, trio in enumerate(combinations(order, 3)):
        listed = [truth, *trio]
        left = [len(s & set(listed)) for s in per_view]
        if min(left) < 2:
            continue
        sig = [structure_signature(x) for x in option_prior_keys(listed)]
        scored.append(((sum(x == sig[0] for x in sig[1:]), min(left)), -n, listed))
        if k == 1 and scored[-1][0] == (3, 4):
            break
    scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
    chosen: list[list[str]] = []
    for _, _, listed in scored:  # alternatives differ in two distractors or more: a real choice
        if len(chosen) < k and all(len(set(listed) & set(c)) <= 2 for c in chosen):
            chosen.append(listed)
    return [(listed, {v: kinds.get(v, fill_type) for v in listed[1:]}) for listed in chosen]
