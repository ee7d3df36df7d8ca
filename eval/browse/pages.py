"""``python -m eval browse RUN [RUN ...] --out DIR``: a static, offline HTML browser of runs.

DIR gets ``index.html`` (every query as a card, filters in the URL fragment), one page per
sample under ``samples/`` (its views, then a table of every setting +0..+3, -1 and all for
every run, so distraction decay shows on one question, then its cards), the images the cards
show under ``media/`` (copied; paths as in the benchmark), and ``browse.json`` (what was
built). CSS and script are inline; nothing is fetched from a network or a server. The folder is
built aside and swapped in whole (bench/outdir.py).
"""
from __future__ import annotations

import json
import shutil
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

from bench.format import Benchmark
from eval.browse.cards import Media, esc, render_card, render_options, render_views, setting_label
from eval.browse.data import (RUN_LABELS, QueryEntry, RunData, build_entries, correctness, facet_counts, load_runs)

ASSETS = Path(__file__).parent
MARKER = "browse.json"
PAIR_FILTERS = (("a_right_b_wrong", "right / ", "wrong"), ("a_wrong_b_right", "wrong / ", "right"),
                ("disagree", "and ", "differ"), ("both_right", "and ", "both right"), ("both_wrong", "and ", "both wrong"))


@lru_cache(maxsize=None)
def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _page(title: str, body: str, body_attrs: str = "", script: bool = False) -> str:
    js = f"<script>\n{_asset('browse.js')}</script>\n" if script else ""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>\n{_asset('browse.css')}</style></head>\n"
            f"<body {body_attrs}>\n{body}\n{js}</body></html>\n")


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def runs_table(runs: list[RunData]) -> str:
    rows = []
    for run in runs:
        s = run.summary or {}
        overall = (s.get("by_axis_granularity") or {}).get("overall", {}).get("all")
        rows.append(f"<tr><td><span class=\"rlabel\">{esc(run.label)}</span></td><td>{esc(run.model)}</td>"
                    f"<td>{esc(run.path)}</td><td>{esc(run.source or 'eval run')}</td><td>{len(run.records)}</td>"
                    f"<td>{_fmt(overall)}</td><td>{_fmt(s.get('delta_dis'))}</td><td>{_fmt(s.get('necessity_gap'))}</td></tr>")
    return ('<table class="runs-table"><tr><th>run</th><th>model</th><th>folder</th><th>source</th><th>queries</th>'
            '<th>overall (primary)</th><th>Δ dis</th><th>necessity gap</th></tr>' + "".join(rows) + "</table>")


def _select(facet: str, values: dict[str, int], label: str) -> str:
    opts = ['<option value="">any</option>'] + [f'<option value="{esc(v)}">{esc(v)} ({n})</option>'
                                               for v, n in values.items()]
    return f'<label>{label} <select data-facet="{facet}">{"".join(opts)}</select></label>'


def filters(entries: list[QueryEntry], runs: list[RunData]) -> str:
    counts = facet_counts(entries, 0)
    parts = [_select("correct", counts["correct"], 'answer of <b class="run-a">A</b>'),
             _select("bucket", counts["bucket"], 'failure of <b class="run-a">A</b>'),
             _select("task", counts["task"], "task"), _select("setting", counts["setting"], "setting"),
             _select("subset", counts["subset"], "subset")]
    if len(runs) > 1:
        run_opts = "".join(f'<option value="{i}">{esc(r.label)}: {esc(r.model)}</option>' for i, r in enumerate(runs))
        pair = "".join(f'<option value="{v}">A {a}B {b}</option>' for v, a, b in PAIR_FILTERS)
        parts += [f'<label>A = <select data-facet="a" data-default="0">{run_opts}</select></label>',
                  f'<label>B = <select data-facet="b" data-default="1">{run_opts}</select></label>',
                  f'<label>compare <select data-facet="pair"><option value="">any</option>{pair}</select></label>']
    parts += ['<label>sample <input data-facet="sample" size="14" placeholder="sample id"></label>',
              '<span id="count"></span>', '<button id="prev" type="button">‹ prev</button>', '<span id="page"></span>',
              '<button id="next" type="button">next ›</button>', '<a id="reset" href="#">reset</a>']
    return '<nav class="filters">' + "".join(parts) + "</nav>"


def decay_table(entries: list[QueryEntry], runs: list[RunData]) -> str:
    """Rows: the sample's queries (+0, +1, ..., -1 variants, all); columns: runs; cells link to cards."""
    head = "<tr><th>setting</th><th>views</th>" + "".join(f"<th>{esc(r.label)}: {esc(r.model)}</th>" for r in runs) + "</tr>"
    rows = []
    for e in entries:
        cells = []
        for rec in e.records:
            state = correctness(rec)
            text = "–" if rec is None else (
                ("✓ " if state == "right" else "✗ " if state == "wrong" else "? ") + (rec.get("letter") or "")
                + (f" ({rec['chosen_type']})" if rec.get("chosen_type") else ""))
            cells.append(f'<td class="{state}"><a href="#q{e.number}">{esc(text)}</a></td>')
        rows.append(f'<tr><td><a href="#q{e.number}">{esc(setting_label(e))}</a></td><td>{len(e.view_order)}</td>'
                    + "".join(cells) + "</tr>")
    return f'<table class="decay">{head}{"".join(rows)}</table>'


def sample_page(bench: Benchmark, index: int, entries: list[QueryEntry], runs: list[RunData], media: Media) -> str:
    s = bench.samples[index]
    meta = f"{s.task} · {s.subset or 'no subset'} · {s.axis or '–'} × {s.granularity or '–'} · scene {s.scene or '–'}"
    pool = list(s.gt_views) + [v for v in s.extra_views if v not in s.gt_views]
    view_ids = pool + [v.view_id for v in s.views if v.view_id not in pool]  # V_GT, then the +k pool in order
    body = (f'<header class="top"><p><a href="../index.html">← all queries</a> · '
            f'<a href="../index.html#sample={esc(quote(s.id, safe=""))}">this sample in the filtered list</a></p>'
            f'<h1>{esc(s.id)} <small>{esc(meta)}</small></h1></header>'
            f'<section class="block"><h2>Views</h2>{render_views(s, view_ids, media, numbered=False)}'
            f'<p class="question">{esc(s.question)}</p>{render_options(s, {})}</section>'
            f'<section class="block"><h2>Across settings</h2>{decay_table(entries, runs)}</section>'
            f'<section class="cards">{"".join(render_card(e, runs, media, f"#q{e.number}") for e in entries)}</section>')
    return _page(f"{s.id}: browse", body)


def image_sizes(bench: Benchmark, rels: set[str]) -> dict[str, tuple[int, int]]:
    from PIL import Image
    sizes = {}
    for rel in rels:
        with Image.open(bench.image_path(rel)) as im:  # reads the header only
            sizes[rel] = im.size
    return sizes


def build_browser(run_dirs: list[str | Path], out: str | Path, bench: str | Path | None = None,
                  page_size: int = 50, overwrite: bool = False) -> dict:
    """Write the browser of ``run_dirs`` to ``out``.

    Args:
        run_dirs: run folders of one benchmark (the first is run A).
        bench: the benchmark folder; default: the one the first run's run.json names.
        page_size: cards per page in index.html.
        overwrite: replace a non-empty ``out`` that is not an earlier browser.
    Returns:
        {"cards": n, "samples": n, "images": n, "out": str}
    Raises:
        EvalInputError: a run is not a run folder, or evaluated another benchmark.
    """
    from bench.outdir import OutDirError, staged_dir
    from eval.errors import DATA, EvalInputError
    benchmark, runs = load_runs(run_dirs, bench)
    entries = build_entries(benchmark, runs)
    by_sample: dict[int, list[QueryEntry]] = {}
    for e in entries:
        by_sample.setdefault(e.sample_index, []).append(e)
    rels = {f.image for i in by_sample for v in benchmark.samples[i].views for f in v.frames}
    sizes = image_sizes(benchmark, rels)
    try:
        with staged_dir(out, overwrite=overwrite, marker=MARKER) as tmp:
            for rel in rels:
                (tmp / "media" / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(benchmark.image_path(rel), tmp / "media" / rel)
            (tmp / "samples").mkdir()
            for i, group in by_sample.items():
                (tmp / "samples" / f"{i}.html").write_text(
                    sample_page(benchmark, i, group, runs, Media("../", sizes)), encoding="utf-8")
            media = Media("", sizes)
            # cards past the first page start hidden, so a large page lays out quickly before the script runs
            cards = "".join(render_card(e, runs, media, f"samples/{e.sample_index}.html#q{e.number}",
                                        hidden=i >= page_size) for i, e in enumerate(entries))
            head = (f'<header class="top"><h1>{esc(benchmark.name)} <small>{esc(benchmark.file)} · '
                    f'{len(entries)} queries · {len(by_sample)} samples</small></h1>{runs_table(runs)}</header>')
            attrs = (f'data-page-size="{int(page_size)}" '
                     f'data-labels="{esc(",".join(RUN_LABELS[:len(runs)]))}"')
            (tmp / "index.html").write_text(
                _page(f"{benchmark.name}: browse", head + filters(entries, runs) + f'<main id="cards">{cards}</main>',
                      attrs, script=True), encoding="utf-8")
            info = {"bench": str(benchmark.root), "runs": [{"label": r.label, "path": str(r.path), "model": r.model}
                                                         for r in runs],
                    "cards": len(entries), "samples": len(by_sample), "images": len(rels)}
            (tmp / MARKER).write_text(json.dumps(info, indent=1) + "\n")
    except OutDirError as err:
        raise EvalInputError([f"ERROR --out {err}"], DATA) from None
    return {**{k: info[k] for k in ("cards", "samples", "images")}, "out": str(out)}
