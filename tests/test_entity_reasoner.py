"""Entity records (bench/entities.py, bench/synth/entity_labels.py), their batches (inputs/entity_batch.py), the entity
reasoner (model/entity_reasoner.py) and its criterion (training/losses.py)."""
from __future__ import annotations


import pytest
import torch

from common.config import load_config
from bench.format import load_benchmark
from bench.synth.config import SynthConfig
from bench.entities import FIELDS
from bench.synth.generate import generate, scene_entities
from inputs.entity_batch import (CONTACT_WIDTH, WordVocab, build_entity_item, build_text_item, collate_entities,
                                 load_entity_labels)
from model.entity_reasoner import EntityReasoner, EntityReasonerConfig
from training.config import LossConfig
from training.losses import SET_COUNT_TASKS, EntityCriterion, count_target

TINY = ["n_scenes=8", "render.width=64", "render.height=64", "workers=1", "tasks.per_scene=3",
        "temporal.n_scenes=2", "temporal.per_scene=3"]


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("entities") / "bench"
    generate(load_config(SynthConfig, None, TINY), out, progress=False)
    return out


@pytest.fixture(scope="module")
def split(bench_dir):
    bench = load_benchmark(bench_dir / "train")
    labels = load_entity_labels(bench_dir, "train")
    vocab = WordVocab.build([s.question for s in bench.samples] + [o for s in bench.samples for o in s.options])
    return bench.samples, labels, vocab


def test_records_show_only_what_the_view_shows(bench_dir):
    labels = load_entity_labels(bench_dir, "train")
    n_person = n_hidden_shirt = 0
    for images in labels.values():
        for ents in images.values():
            for e in ents:
                assert e["kind"] in ("person", "object") and len(e["box"]) == 4
                for f, n in FIELDS.items():
                    if f in e:
                        assert -1 <= e[f] < n, (f, e[f])
                if e["kind"] == "person":
                    n_person += 1
                    n_hidden_shirt += e["shirt"] == -1
                    assert "object_kind" not in e
    assert n_person > 0


def test_labels_equal_the_scene_rebuilt_from_its_config(bench_dir):
    cfg = load_config(SynthConfig, None, TINY)
    labels = load_entity_labels(bench_dir, "train")
    sid = sorted(labels)[0]
    assert scene_entities(cfg, sid) == labels[sid]


def test_training_never_reads_val_or_test_labels(bench_dir):
    for split in ("val", "test"):
        with pytest.raises(PermissionError, match=split):
            load_entity_labels(bench_dir, split)
    assert load_entity_labels(bench_dir, "test", allow_eval_splits=True)


def test_items_attach_marks_and_point_at_the_evidence(split):
    samples, labels, vocab = split
    marked = [s for s in samples if s.marks]
    assert marked
    for s in marked:
        item = build_entity_item(s, list(s.gt_views), labels[s.scene], vocab)
        for m in s.marks:
            v = list(s.gt_views).index(m.view_id) if m.view_id in s.gt_views else None
            if v is None:
                continue
            if m.entity == 0:  # a frame mark: every entity of that image carries it
                assert (item["image_mark"][item["view"] == v] == vocab.stoi[m.label]).all()
                continue
            rows = (item["view"] == v) & (item["mark"] == vocab.stoi[m.label])
            assert rows.sum() == 1, (s.id, m.label)
            assert int(item["entity_id"][rows]) == m.entity  # the mark sits on its own person
    for s in samples:  # the pointer's target: the evidence's entities in its views and time spans
        views = list(s.gt_views) + list(s.extra_views)
        item = build_entity_item(s, views, labels[s.scene], vocab)
        ids = set(item["entity_id"][item["pointer"] > 0].tolist())
        assert ids <= {e for span in s.evidence for e in span.entities}
        extra = torch.tensor([views[int(v)] in s.extra_views for v in item["view"]])
        assert not (item["pointer"][extra] > 0).any()
        assert item["contact"].shape[1] == CONTACT_WIDTH


def test_class_words_are_the_option_words(split):
    _, _, vocab = split
    assert list(vocab.class_words())[:len(FIELDS)] == list(FIELDS)  # the reasoner indexes fields in this order
    words = vocab.class_words()
    red = vocab.stoi["red"]
    assert red in words["shirt"].flatten().tolist() and red in words["object_colour"].flatten().tolist()
    assert [vocab.stoi[str(k)] for k in range(4)] == [3, 4, 5, 6]  # the reasoner's number words


def _batch(split, n=6):
    samples, labels, vocab = split
    items = [{**build_entity_item(s, list(s.gt_views), labels[s.scene], vocab), **build_text_item(s, vocab)}
             for s in samples[:n]]
    return collate_entities(items), vocab


def test_forward_shapes_and_padding(split):
    batch, vocab = _batch(split)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2), vocab.class_words())
    model.eval()
    out = model(batch)
    b, e = batch["entity_mask"].shape
    assert out["option_logits"].shape == batch["option_valid"].shape
    assert (out["option_logits"][~batch["option_valid"]] == -1e4).all()
    assert out["pointer_logits"].shape == (b, e) and out["assoc_logits"].shape == (b, e, e)
    assert torch.isfinite(out["option_logits"][batch["option_valid"]]).all()
    terms = EntityCriterion(LossConfig())(out, batch)
    assert all(torch.isfinite(v) for v in terms.values())


def test_distinct_count_without_association_counts_sightings(split):
    batch, vocab = _batch(split)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2, association=False),
                           vocab.class_words())
    batch["pointer_override"] = ((batch["kind"] == 0) & batch["entity_mask"]).float()
    out = model.eval()(batch)
    sightings = batch["pointer_override"].sum(-1)
    assert torch.allclose(out["distinct_count"], sightings, atol=1e-4)


def test_the_pointer_sees_which_classes_the_question_names(split):
    batch, vocab = _batch(split)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2), vocab.class_words())
    i = model.fields.index("shirt")
    batch["question"][0, 1] = vocab.stoi["red"]
    batch["fields"][0, :, i] = 0
    batch["fields"][0, 0, i] = 1 + vocab.class_words()["shirt"][:, 0].tolist().index(vocab.stoi["red"])
    with torch.no_grad():
        match = model.word_match(batch)
    assert float(match[0, 0, i]) == pytest.approx(1.0, abs=1e-5)
    assert (match[0, 1:, i] == 0).all()  # no shirt shown, no match


def _one_view(split, axis: str):
    """The batch of the first ``axis`` sample's first view, and a small eval-mode reasoner."""
    samples, labels, vocab = split
    s = next(s for s in samples if s.axis == axis)
    item = {**build_entity_item(s, [s.gt_views[0]], labels[s.scene], vocab), **build_text_item(s, vocab)}
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2), vocab.class_words())
    return collate_entities([item]), model.eval()


def test_sightings_in_one_image_are_never_one_entity(split):
    batch, model = _one_view(split, "spatial")
    with torch.no_grad():
        model.assoc_bias.fill_(100.0)  # every pair of sightings "the same person"...
    batch["pointer_override"] = ((batch["kind"] == 0) & batch["entity_mask"]).float()
    with torch.no_grad():
        out = model(batch)  # ...yet one image's sightings stay distinct
    assert float(out["distinct_count"][0]) == pytest.approx(float(batch["pointer_override"].sum()), abs=1e-3)


def test_the_hand_action_read_out_names_the_first_action(split):
    batch, model = _one_view(split, "temporal")
    person = (batch["kind"] == 0) & batch["entity_mask"]
    first_id = int(batch["entity_id"][person][0])
    p = (person & (batch["entity_id"] == first_id)).float()
    fields, names = batch["fields"], model.fields
    l, r = names.index("arm_l"), names.index("arm_r")
    fields[..., l] = fields[..., r] = 1  # down
    frames = batch["frame"][0][p[0] > 0]
    assert len(set(frames.tolist())) >= 2
    t0, t1 = sorted(set(frames.tolist()))[:2]
    fields[0, (batch["frame"][0] == t1) & (p[0] > 0), l] = 4  # raises the left hand later...
    fields[0, (batch["frame"][0] == t0) & (p[0] > 0), r] = 6  # ...after waving the right one
    geo, known = model.floor_geometry(batch)
    with torch.no_grad():
        hand = model.readouts(batch, p, p, p.sum(-1), geo, known)[0][0, -4]
        phrases = model._phrase(model.hand_action_words)  # inputs.entity_batch.HAND_ACTIONS order
    best = int(torch.nn.functional.cosine_similarity(phrases, hand.unsqueeze(0)).argmax())
    assert best == 3  # "waves the right hand"


def test_the_trajectory_read_out_names_the_objects_at_either_end(split):
    batch, model = _one_view(split, "temporal")
    mask, kind, frame = batch["entity_mask"][0], batch["kind"][0], batch["frame"][0]
    objects = torch.nonzero((kind == 1) & mask).flatten()
    person = (kind == 0) & mask
    pid = int(batch["entity_id"][0][person][0])
    mine = person & (batch["entity_id"][0] == pid)
    first, last = int(frame[mine].min()), int(frame[mine].max())
    assert len(objects) >= 2 and first < last
    geo = torch.full((1, mask.shape[0], 3), 9.0)
    start = objects[frame[objects] == first][:1]
    end = objects[(frame[objects] == last) & (batch["entity_id"][0][objects] != batch["entity_id"][0][start])][:1]
    geo[0, start, :2] = torch.tensor([0.0, 0.0])
    geo[0, end, :2] = torch.tensor([2.0, 2.0])
    geo[0, mine & (frame == first), :2] = torch.tensor([0.05, 0.0])
    geo[0, mine & (frame == last), :2] = torch.tensor([1.95, 2.0])
    geo[0, mine & (frame != first) & (frame != last), :2] = torch.tensor([0.5, 0.5])
    airborne = model.fields.index("airborne")
    batch["fields"][0, mine, airborne] = 1  # on the floor
    known = mask.unsqueeze(0).clone()
    at_frame = torch.nn.functional.one_hot(batch["frame"], int(frame.max()) + 1).float() * batch["entity_mask"].unsqueeze(-1)
    early = 0.2 ** torch.arange(at_frame.shape[-1], dtype=torch.float32)
    fields, names = batch["fields"][0], model.fields
    k, c = names.index("object_kind"), names.index("object_colour")
    desc = lambda e: model._class_table(k)[fields[e, k] - 1] + model._class_table(c)[fields[e, c] - 1]  # noqa: E731
    cos = torch.nn.functional.cosine_similarity
    with torch.no_grad():
        got_start, got_end = (e[0] for e in model._trajectory(batch, mine.unsqueeze(0).float(), geo, known, at_frame,
                                                              early))
        assert cos(got_start, desc(int(start)), dim=0) > 0.99 and cos(got_end, desc(int(end)), dim=0) > 0.99
        # off the floor on the first frame, the person's box says it is by the end object: that sighting is left out
        jump = mine & (frame == first)
        geo[0, jump, :2] = torch.tensor([1.95, 2.0])
        batch["fields"][0, jump, airborne] = 2
        got_start, _ = (e[0] for e in model._trajectory(batch, mine.unsqueeze(0).float(), geo, known, at_frame, early))
        assert cos(got_start, desc(int(start)), dim=0) > 0.99
        batch["fields"][0, jump, airborne] = 1  # the same sighting on the floor: the start is the end object
        got_start, _ = (e[0] for e in model._trajectory(batch, mine.unsqueeze(0).float(), geo, known, at_frame, early))
        assert cos(got_start, desc(int(end)), dim=0) > 0.99


def test_set_count_questions_carry_their_number(bench_dir):
    counted = 0
    for s in load_benchmark(bench_dir / "train").samples:
        target = count_target(s)
        if s.task in SET_COUNT_TASKS and s.options[s.answer_index][0].isdigit():
            assert target == float(s.options[s.answer_index])
            counted += 1
        else:
            assert target == -1.0
    assert counted


def test_floor_geometry_recovers_the_feet_point(split):
    batch, vocab = _batch(split)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2), vocab.class_words())
    geo, known = model.floor_geometry(batch)
    b, i = [int(x[0]) for x in torch.nonzero(known, as_tuple=True)]
    # project the recovered floor point back into its camera: it lands on the box's bottom centre
    v = int(batch["view"][b, i])
    K, R, t = batch["camera_K"][b, v], batch["camera_R"][b, v], batch["camera_t"][b, v]
    from model.camera import canonical_offset
    offset = canonical_offset(batch["camera_R"][b:b + 1], batch["camera_t"][b:b + 1], batch["has_camera"][b:b + 1])
    world = torch.cat([geo[b, i, :2] * model.cfg.world_scale, torch.zeros(1)]) + offset[0, 0]
    px = K @ (R @ world + t)
    box = batch["box"][b, i]
    assert torch.allclose(px[:2] / px[2], torch.stack([(box[0] + box[2]) / 2, box[3]]), atol=0.5)


def test_the_oracle_pointer_replaces_the_predicted_one(split):
    batch, vocab = _batch(split)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2), vocab.class_words()).eval()
    a = model(batch)["option_logits"]
    batch["pointer_override"] = batch["pointer"]
    assert not torch.allclose(a, model(batch)["option_logits"])


def test_detections_without_a_true_entity_have_no_association_target(split):
    batch, vocab = _batch(split)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2), vocab.class_words()).eval()
    with torch.no_grad():
        out = model(batch)
    before = EntityCriterion(LossConfig())(out, batch)["assoc"]
    batch["entity_id"][:, 1:] = -1  # unmatched detections: all "-1", which must not read as one entity
    after = EntityCriterion(LossConfig())(out, batch)["assoc"]
    assert float(after) == 0.0 and float(before) > 0.0


def _mixed_items(split, n_each=3):
    """Spatial samples (one frame) and temporal ones (several), all their views: padding and mixed frame counts."""
    samples, labels, vocab = split
    chosen = [s for s in samples if s.axis == "spatial"][:n_each] + [s for s in samples if s.axis == "temporal"][:n_each]
    return [{**build_entity_item(s, list(s.gt_views), labels[s.scene], vocab), **build_text_item(s, vocab)}
            for s in chosen]


def _mixed_batch(split, n_each=3):
    items = _mixed_items(split, n_each)
    vocab = split[2]
    batch = collate_entities(items)
    frames = [int(it["frame"].max()) + 1 for it in items]
    assert min(frames) == 1 and max(frames) > 1 and not batch["entity_mask"].all()
    return batch, vocab


def _assert_same_outputs(got: dict, want: dict, mask: torch.Tensor, atol: float = 5e-4):
    """Equal up to float error: the old bias took floor distances from cdist's matmul form over a whole
    clip (> 25 points), which is off by ~1e-4 where points are close; the groups' distances are exact."""
    pair = mask.unsqueeze(-1) & mask.unsqueeze(-2)
    torch.testing.assert_close(got["option_logits"], want["option_logits"], atol=atol, rtol=1e-4)
    torch.testing.assert_close(got["pointer_logits"], want["pointer_logits"], atol=atol, rtol=1e-4)
    # assoc_scale (10) times a cosine of normalised tokens: float error ~1e-5 becomes ~1e-4
    torch.testing.assert_close(got["assoc_logits"][pair], want["assoc_logits"][pair], atol=10 * atol, rtol=1e-4)
    torch.testing.assert_close(got["distinct_count"], want["distinct_count"], atol=atol, rtol=1e-4)
    torch.testing.assert_close(got["entity_tokens"][mask], want["entity_tokens"][mask], atol=atol, rtol=1e-4)


@pytest.mark.parametrize("entity_attention", [True, False])
def test_entity_attention_per_time_step_equals_the_dense_formulation(split, entity_attention):
    """The blocks on (sample, time step) groups give what one (B, H, E, E) bias with -inf across time
    steps gave (scripts.bench_reasoner keeps that formulation): outputs in eval mode, and the
    gradients of the fit's loss without dropout. Without entity attention a group is one image."""
    from scripts.bench_reasoner import bench_vocab, random_batch, with_dense_attention
    for batch, vocab in (_mixed_batch(split), (random_batch(bench_vocab(), 6, seed=1), bench_vocab())):
        cfg = EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2, dropout=0.0,
                                   entity_attention=entity_attention)
        torch.manual_seed(0)
        new = EntityReasoner(cfg, vocab.class_words())
        old = with_dense_attention(EntityReasoner(cfg, vocab.class_words()))
        old.load_state_dict(new.state_dict())
        with torch.no_grad():
            _assert_same_outputs(new.eval()(batch), old.eval()(batch), batch["entity_mask"])
        for m in (new, old):
            EntityCriterion(LossConfig())(m.train()(batch), batch)["loss"].backward()
        for (name, a), b in zip(new.named_parameters(), old.parameters()):
            if a.grad is not None or b.grad is not None:
                torch.testing.assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-3, msg=name)


def test_entity_attention_never_crosses_time_steps_nor_images_without_it(split):
    batch, vocab = _mixed_batch(split)
    t = batch["frame"] == 1  # move a later frame's tokens: earlier frames do not see it
    for entity_attention in (True, False):
        model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2,
                                                    entity_attention=entity_attention), vocab.class_words()).eval()
        x, geo, known = model.embed_entities(batch)
        with torch.no_grad():
            ref = model.entity_attention(x, batch["view"], batch["frame"], batch["entity_mask"], geo, known)
            moved = model.entity_attention(torch.where(t.unsqueeze(-1), x + 1.0, x), batch["view"], batch["frame"],
                                           batch["entity_mask"], geo, known)
        keep = batch["entity_mask"] & ~t
        torch.testing.assert_close(moved[keep], ref[keep])
        assert not torch.allclose(moved[t & batch["entity_mask"]], ref[t & batch["entity_mask"]])
    # without entity attention, one view's tokens do not see another view's at the same frame
    v = batch["view"] == 0
    with torch.no_grad():
        moved = model.entity_attention(torch.where(v.unsqueeze(-1), x + 1.0, x), batch["view"], batch["frame"],
                                       batch["entity_mask"], geo, known)
    keep = batch["entity_mask"] & ~v
    torch.testing.assert_close(moved[keep], ref[keep])


# -- ablation switches -------------------------------------------------------------------------------------------

def _check_outputs(out: dict, batch: dict):
    b, e = batch["entity_mask"].shape
    valid = batch["option_valid"]
    assert out["option_logits"].shape == valid.shape and (out["option_logits"][~valid] == -1e4).all()
    assert torch.isfinite(out["option_logits"][valid]).all()
    assert out["pointer_logits"].shape == (b, e) and out["assoc_logits"].shape == (b, e, e)
    assert (out["pointer_logits"][~batch["entity_mask"]] == -1e4).all()
    assert out["entity_tokens"].shape[:2] == (b, e) and out["distinct_count"].shape == (b,)
    assert torch.isfinite(out["assoc_logits"]).all() and torch.isfinite(out["entity_tokens"]).all()
    terms = EntityCriterion(LossConfig())(out, batch)
    assert all(torch.isfinite(v) for v in terms.values())
    terms["loss"].backward()


def _same_image(batch: dict) -> torch.Tensor:
    """(B, E, E) pairs of real entities of one image."""
    m = batch["entity_mask"]
    return ((batch["view"].unsqueeze(-1) == batch["view"].unsqueeze(-2))
            & (batch["frame"].unsqueeze(-1) == batch["frame"].unsqueeze(-2)) & m.unsqueeze(-1) & m.unsqueeze(-2))


def test_without_readouts_the_answer_is_the_learned_scorer_alone(split):
    batch, vocab = _mixed_batch(split)
    for readouts in (True, False):
        torch.manual_seed(0)
        model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2, readouts=readouts),
                               vocab.class_words())
        _check_outputs(model.train()(batch), batch)
        model.eval()
        with torch.no_grad():
            ref = model(batch)["option_logits"]
            model.tied_scale.fill_(50.0)
            moved = model(batch)["option_logits"]
        assert torch.equal(moved, ref) != readouts  # the tied term counts only with read-outs


def test_bag_of_frames_has_one_token_per_image(split):
    batch, vocab = _mixed_batch(split)
    torch.manual_seed(0)
    model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2, bag_of_frames=True),
                           vocab.class_words())
    _check_outputs(model.train()(batch), batch)
    model.eval()
    with torch.no_grad():
        out = model(batch)
    same = _same_image(batch)
    b, i, j = torch.nonzero(same, as_tuple=True)
    assert (i != j).any()
    # every entity has its image's token, pointer logit and association row
    torch.testing.assert_close(out["entity_tokens"][b, i], out["entity_tokens"][b, j])
    torch.testing.assert_close(out["pointer_logits"][b, i], out["pointer_logits"][b, j])
    torch.testing.assert_close(out["assoc_logits"][b, i], out["assoc_logits"][b, j])
    # no camera geometry, no association: moving the cameras or the association head changes no answer
    moved = dict(batch, camera_t=batch["camera_t"] + 0.5)
    with torch.no_grad():
        torch.testing.assert_close(model(moved)["option_logits"], out["option_logits"])
        model.assoc_bias.fill_(50.0)
        torch.testing.assert_close(model(batch)["option_logits"], out["option_logits"])
    default = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2), vocab.class_words())
    with torch.no_grad():
        assert not torch.allclose(default.eval()(moved)["option_logits"], default(batch)["option_logits"])


def test_blind_sees_neither_what_the_images_show_nor_how_many_entities(split):
    items = _mixed_items(split)
    vocab = split[2]
    gen = torch.Generator().manual_seed(0)
    other = []
    for it in items:  # keep the views and frames; other entities, fewer of them
        first = torch.ones_like(it["view"], dtype=torch.bool)
        first[1:] = (it["view"][1:] != it["view"][:-1]) | (it["frame"][1:] != it["frame"][:-1])
        keep = first | (torch.rand(len(first), generator=gen) < 0.5)
        per_entity = ("fields", "contact", "kind", "box", "image_hw", "view", "frame", "time", "mark", "image_mark",
                      "mark_role", "entity_id", "pointer")
        new = {k: v[keep] if k in per_entity else v for k, v in it.items()}
        new["fields"] = torch.randint(0, 3, new["fields"].shape, generator=gen)
        new["contact"] = torch.rand(new["contact"].shape, generator=gen).round()
        new["box"] = new["box"].flip(0)
        new["kind"] = 1 - new["kind"]
        new["mark"] = torch.full_like(new["mark"], vocab.stoi["1"])
        new["camera_t"] = new["camera_t"] + 1.0
        other.append(new)
    batch, changed = collate_entities(items), collate_entities(other)
    assert changed["entity_mask"].sum() < batch["entity_mask"].sum()
    for blind in (True, False):
        torch.manual_seed(0)
        model = EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2, blind=blind),
                               vocab.class_words())
        if blind:
            _check_outputs(model.train()(batch), batch)
        with torch.no_grad():
            a, c = model.eval()(batch), model(changed)
        assert torch.allclose(a["option_logits"], c["option_logits"], atol=1e-5) == blind
        if blind:  # each entity gets its image's outputs
            b, i, j = torch.nonzero(_same_image(batch), as_tuple=True)
            torch.testing.assert_close(a["pointer_logits"][b, i], a["pointer_logits"][b, j])
            torch.testing.assert_close(a["assoc_logits"][b, i], a["assoc_logits"][b, j])
