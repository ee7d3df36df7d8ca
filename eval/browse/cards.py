"""HTML of one query card: the views as the model saw them, the question, and every run's answer.

Everything taken from a benchmark or a prediction file goes through ``esc`` (html.escape,
quotes included), so a raw answer holding ``<script>`` is shown, never run. Cards carry their
facet values as data attributes (``data-task``, ``data-setting``, ``data-c0`` = run A's
correctness, ``data-b0`` = its failure bucket, ...) for the page's filter script.
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass
from urllib.parse import quote

from bench.format import Sample, View
from bench.validate import LETTERS
from eval.browse.data import QueryEntry, RunData, bucket, correctness

VERDICT = {"right": "✓ right", "wrong": "✗ wrong", "unread": "? unread", "missing": "– not asked"}


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


@dataclass
class Media:
    """Where images live, seen from the page being written."""
    prefix: str  # "" for index.html, "../" for samples/<i>.html
    sizes: dict[str, tuple[int, int]]  # benchmark-relative image path -> (width, height)

    def src(self, rel: str) -> str:
        return self.prefix + "media/" + quote(rel)


def role_of(sample: Sample, view_id: str) -> tuple[str, str]:
    """(css class, label) of a view: V_GT, extra k (its place in the +k pool), or plain view."""
    if view_id in sample.gt_views:
        return "gt", "V_GT"
    if view_id in sample.extra_views:
        return "extra", f"extra {sample.extra_views.index(view_id) + 1}"
    return "other", "view"


def _marks(sample: Sample, view: View, t: float, size: tuple[int, int] | None) -> str:
    if size is None:
        return ""
    w, h = size
    out = []
    for m in sample.marks:
        if m.view_id != view.view_id or abs(m.t - t) > 1e-6:
            continue
        x0, y0, x1, y1 = m.box
        style = (f"left:{100 * x0 / w:.2f}%;top:{100 * y0 / h:.2f}%;"
                 f"width:{100 * (x1 - x0) / w:.2f}%;height:{100 * (y1 - y0) / h:.2f}%")
        out.append(f'<span class="mark" style="{style}" title="entity {esc(m.entity)}">{esc(m.label)}</span>')
    return "".join(out)


def render_view(sample: Sample, view: View, position: int | None, media: Media) -> str:
    """One view: caption (position, id, role, evidence) and its frames, a strip when temporal."""
    cls, label = role_of(sample, view.view_id)
    spans = [e for e in sample.evidence if e.view_id == view.view_id]
    classes = ["view", cls] + (["evidence"] if spans else []) + (["temporal"] if len(view.frames) > 1 else [])
    caption = (f'<b>{"View " + str(position) if position else esc(view.view_id)}</b>'
               + (f' <span class="vid">{esc(view.view_id)}</span>' if position else "")
               + f' <span class="role {cls}">{esc(label)}</span>'
               + (' <span class="ev">evidence</span>' if spans else "")
               + ('' if view.camera else ' <span class="nocam">no camera</span>'))
    frames = []
    for f in view.frames:
        in_span = any(e.t_start - 1e-6 <= f.t <= e.t_end + 1e-6 for e in spans)
        t = f'<span class="t">t={f.t:g}s</span>' if len(view.frames) > 1 else ""
        frames.append(f'<div class="frame{" in-span" if in_span else ""}">'
                      f'<img src="{esc(media.src(f.image))}" loading="lazy" alt="{esc(view.view_id)} t={f.t:g}">'
                      f'{_marks(sample, view, f.t, media.sizes.get(f.image))}{t}</div>')
    return (f'<figure class="{" ".join(classes)}"><figcaption>{caption}</figcaption>'
            f'<div class="frames">{"".join(frames)}</div></figure>')


def render_views(sample: Sample, view_ids: list[str], media: Media, numbered: bool = True) -> str:
    views = [sample.view(v) for v in view_ids if v in {x.view_id for x in sample.views}]
    return '<div class="views">' + "".join(
        render_view(sample, v, i if numbered else None, media) for i, v in enumerate(views, 1)) + "</div>"


def render_options(sample: Sample, picks: dict[str, list[str]]) -> str:
    """The options: gold marked, each distractor's type, and which runs chose which option."""
    items = []
    for i, text in enumerate(sample.options):
        letter = LETTERS[i]
        gold = letter == sample.answer
        dtype = sample.distractors.get(letter)
        chips = "".join(f'<span class="pick{" ok" if gold else " bad"}">{esc(r)}</span>' for r in picks.get(letter, []))
        items.append(f'<li class="opt{" gold" if gold else ""}{" chosen" if picks.get(letter) else ""}">'
                     f'<span class="letter">{letter}</span> <span class="text">{esc(text)}</span>'
                     + (' <span class="tag gold">gold</span>' if gold else "")
                     + (f' <span class="tag dtype">{esc(dtype)}</span>' if dtype else "") + chips + "</li>")
    return '<ol class="options">' + "".join(items) + "</ol>"


def render_run(run: RunData, rec: dict | None, view_order: list[str]) -> str:
    state = correctness(rec)
    head = f'<h4><span class="rlabel">{esc(run.label)}</span> {esc(run.model)} <span class="verdict">{VERDICT[state]}</span></h4>'
    if rec is None:
        return f'<section class="run {state}">{head}<p class="why">this run has no answer to this query</p></section>'
    kind = bucket(rec)
    facts = [f"chose <b>{esc(rec.get('letter') or '–')}</b>", f"parse: {esc(rec.get('method'))}"]
    if kind not in ("correct",):
        facts.append(f'failure: <span class="bucket">{esc(kind)}</span>')
    body = [f'<p class="facts">{" · ".join(facts)}</p>']
    if rec.get("raw") is not None:
        body.append(f'<pre class="raw">{esc(rec["raw"])}</pre>')
    if rec.get("scores") is not None:
        body.append(f'<pre class="raw scores">scores {esc(json.dumps(rec["scores"]))}</pre>')
    if rec.get("fallback_raw") is not None:
        body.append(f'<div class="fallback"><span>fallback extractor said</span><pre>{esc(rec["fallback_raw"])}</pre></div>')
    order = list(rec.get("view_order") or [])
    if order and order != view_order:
        body.append(f'<p class="why">saw the views in the order {esc(", ".join(order))}</p>')
    return f'<section class="run {state}">{head}{"".join(body)}</section>'


def setting_label(entry: QueryEntry) -> str:
    label = entry.setting
    if entry.variant.startswith("drop="):
        label += f" (V_GT without {entry.variant[5:]})"
    if entry.rotation:
        label += f" · rotation {entry.rotation}"
    return label


def render_card(entry: QueryEntry, runs: list[RunData], media: Media, sample_href: str, hidden: bool = False) -> str:
    """One <article class="card"> with its facet data attributes."""
    s = entry.sample
    picks: dict[str, list[str]] = {}
    for run, rec in zip(runs, entry.records):
        if rec is not None and rec.get("letter"):
            picks.setdefault(rec["letter"], []).append(run.label)
    attrs = {"id": f"q{entry.number}", "data-key": entry.key, "data-sample": s.id, "data-task": s.task,
             "data-setting": entry.setting, "data-subset": s.subset or "none"}
    for i, rec in enumerate(entry.records):
        attrs[f"data-c{i}"] = correctness(rec)
        attrs[f"data-b{i}"] = bucket(rec)
    attr_text = " ".join(f'{k}="{esc(v)}"' for k, v in attrs.items())
    axis = f"{s.axis or '–'} × {s.granularity or '–'}"
    head = (f'<header class="card-head"><span class="setting">{esc(setting_label(entry))}</span> '
            f'<a class="sid" href="{esc(sample_href)}">{esc(s.id)}</a> '
            f'<span class="meta">{esc(s.task)} · {esc(s.subset or "no subset")} · {esc(axis)}</span></header>')
    qa = f'<div class="qa"><p class="question">{esc(s.question)}</p>{render_options(s, picks)}</div>'
    run_html = "".join(render_run(run, rec, entry.view_order) for run, rec in zip(runs, entry.records))
    return (f'<article class="card" {attr_text}{" hidden" if hidden else ""}>{head}{render_views(s, entry.view_order, media)}{qa}'
            f'<div class="runs" style="--n:{len(runs)}">{run_html}</div></article>')
