"""The run browser, checked with the standard library: cards, facets, images, escaping, refusal."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

from browse_runs import SCRIPT, Cards, make_runs, predictions
from eval.__main__ import main
from eval.adapters import ModelAdapter, Response, build_model
from eval.browse import build_browser
from eval.errors import EvalInputError
from eval.runner import evaluate


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("browse")
    bench, tricky, oracle = make_runs(root)
    out = root / "site"
    assert main(["browse", str(tricky), str(oracle), "--out", str(out), "--page-size", "7"]) == 0
    return bench, tricky, oracle, out


def test_cards_match_the_predictions_and_their_facets(built):
    bench, tricky, oracle, out = built
    recs = predictions(tricky)
    page = Cards((out / "index.html").read_text())
    assert len(page.cards) == len(recs) == len(predictions(oracle)) > 20
    by_key = {c["data-key"]: c for c in page.cards}
    assert set(by_key) == set(recs)
    for key, rec in recs.items():
        card = by_key[key]
        state = "unread" if rec["failed"] else "right" if rec["correct"] else "wrong"
        assert card["data-c0"] == state and card["data-c1"] == "right"
        assert card["data-setting"] == rec["setting"] and card["data-task"] == rec["task"]
        expected_bucket = "correct" if rec["correct"] else "parse_failure" if rec["failed"] else (
            rec["chosen_type"] or "untyped")
        assert card["data-b0"] == expected_bucket
    wrong = [k for k, r in recs.items() if not r["correct"] and not r["failed"]]
    assert sum(c["data-c0"] == "wrong" for c in page.cards) == len(wrong) > 0
    assert sum(c["data-c0"] == "unread" for c in page.cards) > 0
    # the facet menu counts the same cards
    text = (out / "index.html").read_text()
    assert f'<option value="wrong">wrong ({len(wrong)})</option>' in text
    assert page.scripts == 1 and 'data-page-size="7"' in text


def test_every_image_resolves_and_is_the_benchmark_file(built):
    bench, _, _, out = built
    pages = [out / "index.html", *sorted((out / "samples").glob("*.html"))]
    assert len(pages) == 1 + 8
    seen = 0
    for page in pages:
        for src in Cards(page.read_text()).images:
            target = (page.parent / unquote(src)).resolve()
            assert target.is_file(), (page, src)
            rel = target.relative_to((out / "media").resolve())
            assert target.read_bytes() == (bench / rel).read_bytes()
            seen += 1
    assert seen > 100


def test_raw_answers_are_escaped(built):
    _, _, _, out = built
    for page in [out / "index.html", *(out / "samples").glob("*.html")]:
        text = page.read_text()
        assert SCRIPT not in text and text.count("pwned") == text.count("&lt;script&gt;document.title=&quot;pwned")
    index = (out / "index.html").read_text()
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in index
    assert all(Cards(p.read_text()).scripts == 0 for p in (out / "samples").glob("*.html"))


def test_card_shows_roles_evidence_frames_and_marks(built):
    _, _, _, out = built
    text = (out / "index.html").read_text()
    start = text.index('data-key="s000-svs|+2||r0"')
    card = text[start:text.index("</article>", start)]
    assert card.count("<figure") == 3 and "V_GT" in card and "extra 1" in card and "extra 2" in card
    assert 'class="view gt evidence temporal"' in card and card.count('class="frame in-span"') == 1
    assert card.count("<img ") == 6 and "t=0.5s" in card  # two frames per view, as a strip
    assert card.count('class="pick ok">B<') == 1  # the oracle (run B) chose the gold option
    mvn = text[text.index('data-key="s000-mvn|+0||r0"'):]
    mvn = mvn[:mvn.index("</article>")]
    assert mvn.count('class="mark"') == 1 and "left:6.25%;top:6.25%;width:25.00%;height:56.25%" in mvn
    assert "(V_GT without cam" in text and 'class="tag dtype">naive_sum<' in text
    assert "I cannot tell from these views." in text and "parse: failed" in text


def test_sample_page_links_every_setting(built):
    bench, tricky, _, out = built
    ids = [s["id"] for s in json.loads((bench / "benchmark.json").read_text())["samples"]]
    page = (out / "samples" / f"{ids.index('s001-svs')}.html").read_text()
    table = page[page.index('<table class="decay">'):page.index("</table>", page.index('<table class="decay">'))]
    for setting in ("+0", "+1", "+2", "+3"):
        assert f">{setting}</a>" in table
    anchors = [c["id"] for c in Cards(page).cards]
    assert len(anchors) == 4 and all(f'href="#{a}"' in table for a in anchors)
    mvn = (out / "samples" / f"{ids.index('s001-mvn')}.html").read_text()
    assert mvn.count("-1 (V_GT without cam") >= 4  # two -1 variants, each in the table and on its card


def test_refuses_a_run_of_another_benchmark(built, tmp_path, capsys):
    bench, tricky, _, _ = built
    other = tmp_path / "other"
    shutil.copytree(bench, other)
    doc = json.loads((other / "benchmark.json").read_text())
    doc["samples"][0]["question"] = "A different question?"
    (other / "benchmark.json").write_text(json.dumps(doc))
    evaluate(other, "oracle", tmp_path / "other_run", progress=False, plots=False, n_boot=50)
    with pytest.raises(EvalInputError, match="different benchmark"):
        build_browser([tricky, tmp_path / "other_run"], tmp_path / "site")
    assert main(["browse", str(tmp_path / "other_run"), "--bench", str(bench), "--out", str(tmp_path / "s2")]) == 1
    assert "evaluated a different benchmark" in capsys.readouterr().err
    assert not (tmp_path / "site").exists() and not (tmp_path / "s2").exists()
    assert main(["browse", str(tmp_path / "nothing"), "--out", str(tmp_path / "s3")]) == 1


def test_rebuild_replaces_a_browser_but_not_other_folders(built, tmp_path):
    _, tricky, _, _ = built
    out = tmp_path / "site"
    build_browser([tricky], out)
    first = (out / "index.html").read_text()
    build_browser([tricky], out)  # an earlier browser is replaced without --overwrite
    assert (out / "index.html").read_text() == first and 'data-labels="A"' in first
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("x")
    with pytest.raises(EvalInputError, match="not empty"):
        build_browser([tricky], tmp_path / "notes")
    assert (tmp_path / "notes" / "keep.txt").read_text() == "x"
    assert not [p for p in Path(tmp_path).iterdir() if p.name.startswith(".")]  # no staging folder left


def test_fallback_output_and_scores_are_shown(built, tmp_path):
    bench = built[0]

    class Mumbler(ModelAdapter):
        def generate(self, requests):
            return [Response(text="Hmm, <b>hard</b> to say.") for _ in requests]

    evaluate(bench, Mumbler(), tmp_path / "fb", settings="+0", fallback="oracle", fallback_args={"output": "letter"},
             progress=False, plots=False, n_boot=50)
    evaluate(bench, build_model("oracle", {"output": "scores"}), tmp_path / "sc", settings="+0", progress=False,
             plots=False, n_boot=50)
    build_browser([tmp_path / "fb", tmp_path / "sc"], tmp_path / "site")
    text = (tmp_path / "site" / "index.html").read_text()
    cards = Cards(text).cards
    assert len(cards) == 6 and all(c["data-c0"] == "right" and c["data-c1"] == "right" for c in cards)
    assert text.count("fallback extractor said") == 6 and text.count("parse: fallback") == 6
    assert "Hmm, &lt;b&gt;hard&lt;/b&gt; to say." in text and "<b>hard</b>" not in text
    assert text.count('class="raw scores">scores [') == 6 and "parse: scores" in text
