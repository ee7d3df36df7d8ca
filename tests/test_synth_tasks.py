"""Each task's verifier on hand-built observation tables with a known answer."""
from __future__ import annotations

from bench.entities import ARM_TEXT
from bench.synth import tasks_mvn as mvn
from bench.synth import tasks_svs as svs
from bench.synth.options import NOTA
from bench.synth.tasks import TASKS
from bench.synth.verify import check_question, determined, minimal_resolving_set, oracle_answer

VIEWS = ["cam0", "cam1", "cam2", "cam3"]


def _check(task, table, facts, listed, answer, gt, nota=False):
    return check_question(TASKS[task].subset, TASKS[task].consistent, table, facts, VIEWS, listed, nota, answer, gt)


def test_dedup_count_needs_two_views():
    table = {"cam0": {"seen": ["1", "2"]}, "cam1": {"seen": ["2", "3", "4"]}, "cam2": {"seen": ["1"]},
             "cam3": {"seen": []}}
    facts = {"n_persons": 4, "domain": mvn.COUNTS}
    res = _check("dedup_count", table, facts, ["3", "4", "5", "6"], "4", ["cam0", "cam1"])
    assert res["svi"] and res["cvr"] and res["minimal"]
    # elimination by the options: if every other option is below what cam1 shows (3), cam1 alone decides
    assert determined(mvn.consistent_dedup, table, facts, ["cam1"], ["0", "1", "2", "4"], False) == "4"
    assert minimal_resolving_set(mvn.consistent_dedup, table, facts, VIEWS, ["3", "4", "5", "6"], False, "4",
                                 VIEWS) == ["cam0", "cam1"]


def test_action_count_combines_arms_across_views():
    table = {"cam0": {"arms": {"1": [1, None], "2": [0, None]}}, "cam1": {"arms": {"2": [None, 0], "3": [0, 0]}},
             "cam2": {"arms": {}}, "cam3": {"arms": {"1": [None, None]}}}
    facts = {"persons": ["1", "2", "3"], "domain": mvn.COUNTS}
    assert mvn.consistent_action(table, facts, ["cam0", "cam1"]) == {"1"}
    assert mvn.consistent_action(table, facts, ["cam0"]) == {"1", "2", "3"}  # 2 and 3 unknown
    assert _check("action_count", table, facts, ["0", "1", "2", "3"], "1", ["cam0", "cam1"])["cvr"]


def test_identity_match_same_shirt_resolved_by_trousers():
    marked = {"shirt": "red", "trousers": "black"}
    table = {"cam0": {"marked": marked}, "cam1": {"persons": {
        "2": {"shirt": "red", "trousers": "blue"}, "3": {"shirt": "red", "trousers": "black"},
        "4": {"shirt": "green"}, "5": {"shirt": "blue", "trousers": "black"}}}, "cam2": {}, "cam3": {}}
    facts = {"mark_view": "cam0", "cand_view": "cam1", "labels": ["2", "3", "4", "5"],
             "domain": ["2", "3", "4", "5", "other"]}
    res = _check("identity_match", table, facts, ["2", "3", "4", "5"], "3", ["cam0", "cam1"])
    assert res["svi"] and res["cvr"] and res["minimal"]
    # without trousers in view the same-shirt person cannot be told apart
    table["cam1"]["persons"]["3"] = {"shirt": "red"}
    table["cam1"]["persons"]["2"] = {"shirt": "red"}
    assert not _check("identity_match", table, facts, ["2", "3", "4", "5"], "3", ["cam0", "cam1"])["cvr"]


def _contact_table(states: dict, ident: dict, dirs: dict, key: str) -> dict:
    return {v: {"ident": ident[v], "dir": dirs[v], key: states[v]} for v in VIEWS}


def test_person_object_contact_needs_two_wide_views_or_elimination():
    dirs = {"cam0": [1, 0, 0], "cam1": [0, 1, 0], "cam2": [0.99, 0.14, 0], "cam3": [-1, 0, 0]}
    ident = {"cam0": True, "cam1": True, "cam2": False, "cam3": False}
    names = ["red box", "blue ball", "green pole", "white chair", "black box"]
    st = {v: {n: "hidden" for n in names} for v in VIEWS}
    st["cam0"].update({"red box": "overlap", "blue ball": "overlap", "green pole": "separated"})
    st["cam1"].update({"red box": "overlap", "blue ball": "separated", "white chair": "separated"})
    facts = {"mark_view": "cam0", "domain": names, "confirm_angle": 30.0}
    table = _contact_table(st, ident, dirs, "pairs")
    res = _check("person_object_contact", table, facts, names[:4], "red box", ["cam0", "cam1"])
    assert res["svi"] and res["cvr"] and res["minimal"]
    # 5-option mode: the unlisted black box stays possible until a wide pair of views confirms the red box
    assert determined(mvn.consistent_object_contact, table, facts, ["cam0", "cam1"], names[:4], True) == "red box"
    st["cam1"]["red box"] = "hidden"
    table = _contact_table(st, ident, dirs, "pairs")
    assert determined(mvn.consistent_object_contact, table, facts, ["cam0", "cam1"], names[:4], True) is None
    # views other than the mark view only help when the mark view is also shown
    assert mvn.consistent_object_contact(table, facts, ["cam1"]) == set(names)


def test_limb_contact_and_limb_occlusion():
    parts = ["left hand", "right hand", "left foot", "right foot", "head"]
    dirs = {"cam0": [1, 0, 0], "cam1": [0, 1, 0], "cam2": [0, -1, 0], "cam3": [-1, 0, 0]}
    ident = {v: True for v in VIEWS}
    st = {v: {p: "hidden" for p in parts} for v in VIEWS}
    st["cam0"].update({"right hand": "overlap", "left hand": "overlap"})
    st["cam2"].update({"left hand": "separated", "left foot": "separated", "right foot": "separated"})
    facts = {"mark_view": "cam0", "domain": parts, "confirm_angle": 30.0}
    table = _contact_table(st, ident, dirs, "parts")
    res = _check("limb_contact", table, facts, parts[:4], "right hand", ["cam0", "cam2"])
    assert res["svi"] and res["cvr"] and res["minimal"]

    states = list(ARM_TEXT.values())
    occ = {"cam0": {"ident": True, "arm": False}, "cam1": {"ident": True, "arm": True},
           "cam2": {"ident": False, "arm": True}, "cam3": {"ident": True, "arm": False}}
    facts = {"mark_view": "cam0", "truth": states[0], "domain": states}
    res = _check("limb_occlusion", occ, facts, states[:4], states[0], ["cam0", "cam1"])
    assert res["svi"] and res["cvr"] and res["minimal"]
    assert mvn.consistent_limb_occlusion(occ, facts, ["cam0", "cam2"]) == set(states)


def test_svs_tasks_golden_view_only():
    colours = ["red", "blue", "green", "pink"]
    attr = {v: {"object_visible": False, "people": {}} for v in VIEWS}
    attr["cam1"] = {"object_visible": True, "people": {"1": {"status": "overlap", "shirt": "pink"},
                                                       "2": {"status": "separated", "shirt": "red"}}}
    attr["cam2"] = {"object_visible": True, "people": {"1": {"status": "overlap", "shirt": "pink"},
                                                       "2": {"status": "overlap", "shirt": "red"}}}
    facts = {"domain": colours}
    res = _check("attribute", attr, facts, colours, "pink", ["cam1"])
    assert res["svi"] and res["cvr"]
    assert not _check("attribute", attr, facts, colours, "pink", ["cam2"])["cvr"]

    objs = ["red box", "blue ball", "green pole", "white chair"]
    rel = {v: {"ident": v == "cam0", "objects": {o: True for o in objs}} for v in VIEWS}
    facts = {"distances": {"red box": 0.4, "blue ball": 1.5, "green pole": 2.0, "white chair": 3.0},
             "margin": 0.5, "domain": objs}
    assert _check("relation", rel, facts, objs, "red box", ["cam0"])["cvr"]
    rel["cam0"]["objects"]["blue ball"] = False  # a hidden object might be nearer
    assert svs.consistent_relation(rel, facts, ["cam0"]) == {"red box", "blue ball"}

    cnt = {v: {"framed": v == "cam3", "seen": 3, "borderline": 0} for v in VIEWS}
    facts = {"domain": [str(k) for k in range(13)]}
    res = _check("count_in_view", cnt, facts, ["2", "3", "4", "5"], "3", ["cam3"])
    assert res["svi"] and res["cvr"]
    cnt["cam3"]["borderline"] = 1
    assert not _check("count_in_view", cnt, facts, ["2", "3", "4", "5"], "3", ["cam3"])["cvr"]


def test_oracle_is_a_fair_guess_among_open_options():
    table = {"cam0": {"seen": ["1", "2"]}, "cam1": {"seen": ["2", "3", "4"]}, "cam2": {"seen": ["1"]},
             "cam3": {"seen": []}}
    facts = {"n_persons": 4, "domain": mvn.COUNTS}
    answers = {oracle_answer(mvn.consistent_dedup, table, facts, VIEWS, ["2", "3", "4", "5"], True, f"k{i}")
               for i in range(40)}
    assert answers == {"3", "4", "5", NOTA}  # cam1 rules out "2"; nothing rules out the rest


def test_dedup_on_a_rendered_hand_built_scene():
    """Two people on either side of a wall, one camera on each side: only both views count them."""
    import numpy as np

    from bench.synth.body import Person, Pose
    from bench.synth.camera import make_camera
    from bench.synth.config import SynthConfig
    from bench.synth.observe import observe_view
    from bench.synth.questions import verify_candidate
    from bench.synth.renderer import render
    from bench.synth.scene import Scene, SceneObject
    from bench.synth.tasks_common import TaskContext

    cfg = SynthConfig()
    cfg.render.width = cfg.render.height = 64
    cfg.scene.max_persons = 4  # answer support 1-4 for this two-person scene
    people = [Person(1, (1.0, 0.0), 0.0, 1.7, "red", "black", None, (230, 190, 150), Pose()),
              Person(2, (-1.0, 0.0), 0.0, 1.7, "blue", "grey", None, (230, 190, 150), Pose())]
    wall = SceneObject(11, "box", "white", (0.0, 0.0), 0.0, {"w": 0.3, "d": 6.0, "h": 2.5})
    cams = [make_camera(f"cam{i}", (x, y, 1.2), (tx, 0.0, 1.0), 50.0, 64, 64)
            for i, (x, y, tx) in enumerate([(5.0, 0.3, 1.0), (-5.0, 0.3, -1.0), (4.5, -0.5, 1.0), (-4.5, -0.5, -1.0)])]
    scene = Scene("hand", people, [wall], cams)
    obs = {c.view_id: observe_view(render(scene.entities(), c, cfg.render, scene.shadows()), scene, cfg.observe)
           for c in cams}
    assert [p for p, r in obs["cam0"]["persons"].items() if r["seen"]] == [1]
    assert [p for p, r in obs["cam1"]["persons"].items() if r["seen"]] == [2]
    ctx = TaskContext(scene, obs, {c.view_id: c for c in cams}, np.random.default_rng(0), cfg, False)
    rec = verify_candidate(TASKS["dedup_count"], next(TASKS["dedup_count"].propose(ctx)), ctx)
    assert rec is not None and rec["answer_value"] == "2" and len(rec["gt_views"]) == 2
    assert {rec["gt_views"][0][-1], rec["gt_views"][1][-1]} in ({"0", "1"}, {"0", "3"}, {"2", "1"}, {"2", "3"})
    assert rec["types"].get("1", "single_view_count") == "single_view_count"  # listed when the rank allows
