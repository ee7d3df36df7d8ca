"""Supervising where the person track looks (loss.track_locate): the generator's per-frame box of
the asked person (meta "person_boxes"), its batch form (inputs/track.py) and the loss."""
import dataclasses
import json

import pytest
import torch

from common.config import ConfigError
from bench.format import Camera, Frame, View
from inputs.track import IGNORE, box_cells, track_boxes
from model import build_model, tiny_model_config
from model.dummy_batch import random_batch, with_answer_labels
from training.config import LossConfig, load_train_config
from test_model_track import fit_steps
from training.losses import CrossViewCriterion

CLIPS = dict(views=[2, 3, 1], frames=[8, 8, 8], options=[4, 4, 5], cameras=[True, True, False])


def _view(view_id, n_frames=3, camera=True):
    cam = Camera(K=[[100, 0, 50], [0, 100, 25], [0, 0, 1]], R=[[1, 0, 0], [0, 1, 0], [0, 0, 1]], t=[0, 0, 0],
                 width=100, height=50) if camera else None
    return View(view_id, [Frame(t=0.5 * j, image=f"images/s/{view_id}_f{j:02d}.png") for j in range(n_frames)], cam)


def test_boxes_follow_the_view_set_and_say_where_the_person_shows_no_pixel():
    meta = {"person_boxes": {"cam0": [[10, 5, 30, 25], None, [0, 0, 100, 50]], "cam1": [None, None, None]}}
    box, flag = track_boxes(meta, [_view("cam1"), _view("cam0"), _view("cam9"), _view("cam0", camera=False)], 4)
    assert flag.tolist() == [[0, 0, 0, IGNORE], [1, 0, 1, IGNORE], [IGNORE] * 4, [IGNORE] * 4]
    assert torch.allclose(box[1, 0], torch.tensor([0.1, 0.1, 0.3, 0.5]))
    assert torch.allclose(box[1, 2], torch.tensor([0.0, 0.0, 1.0, 1.0]))
    assert (box[0] == 0).all()
    _, none = track_boxes({}, [_view("cam0")], 3)
    assert (none == IGNORE).all()


def test_box_cells_marks_the_cells_a_box_overlaps():
    cells = box_cells(torch.tensor([[0.1, 0.1, 0.3, 0.5], [0.55, 0.55, 0.56, 0.56], [0.0, 0.0, 1.0, 1.0]]), 2)
    assert cells.tolist() == [[True, False, False, False],  # inside the top-left cell
                              [False, False, False, True],  # a tiny box still marks its cell
                              [True, True, True, True]]
    grid = box_cells(torch.tensor([0.25, 0.0, 0.5, 0.2]), 4).view(4, 4)
    assert grid[0].tolist() == [False, True, False, False] and not grid[1:].any()  # edges touch, not overlap


def _config():
    cfg = tiny_model_config()
    return dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, track=True))


def test_the_locator_reports_where_it_looked():
    torch.manual_seed(0)
    model = build_model(_config()).eval()
    batch = with_answer_labels(random_batch(model.cfg, **CLIPS))
    with torch.no_grad():
        where = model(batch)["track_locate"]
        alone = model.forward_track(batch)["track_locate"]
    p = batch["patch_tokens"].shape[-2]
    assert where.shape == (*batch["frame_mask"].shape, 1 + p)
    assert torch.allclose(where.sum(-1), torch.ones(where.shape[:-1]), atol=1e-5)
    assert torch.allclose(where, alone, atol=1e-6)


def test_the_locate_loss_is_masked_and_teaches_the_locator():
    torch.manual_seed(0)
    model = build_model(_config()).train()
    batch = with_answer_labels(random_batch(model.cfg, **CLIPS))
    crit = CrossViewCriterion(LossConfig(track=0.0, identity=0.0, track_locate=1.0))
    spatial = dict(batch, track_box_flag=torch.full_like(batch["track_box_flag"], IGNORE))
    assert float(crit(model(spatial), spatial)["loss_track_locate"]) == 0.0
    assert "loss_track_locate" not in CrossViewCriterion(LossConfig(identity=0.0))(model(batch), batch)
    keep, target = crit.locate_targets(model(batch), batch)
    assert keep.tolist() == ((batch["track_box_flag"] != IGNORE) & batch["frame_mask"]).tolist()
    assert (target[..., 0] == (batch["track_box_flag"] == 0)).all()  # null cell: no pixel shows
    assert not target[batch["track_box_flag"] == 1][:, 0].any() and target[batch["track_box_flag"] == 1].any(-1).all()
    first, last = fit_steps(model, lambda: crit.loss_track_locate(model(batch), batch))
    assert last < 0.5 * first


def test_a_stage_of_the_track_alone_also_trains_its_locator():
    torch.manual_seed(0)
    model = build_model(_config()).train()
    batch = with_answer_labels(random_batch(model.cfg, **CLIPS))
    crit = CrossViewCriterion(LossConfig(answer=0.0, evidence=0.0, entity_evidence=0.0, identity=0.0,
                                         view_count=0.0, track=1.0, track_locate=0.5))
    assert crit.track_only
    losses = crit(model.forward_track(batch), batch)
    assert set(losses) == {"loss", "loss_track", "loss_track_locate"}
    assert torch.allclose(losses["loss"], losses["loss_track"] + 0.5 * losses["loss_track_locate"])


def test_the_generator_records_the_asked_persons_box_on_every_frame():
    from bench.synth.generate import build_temporal_scene
    from bench.synth.questions import person_boxes
    from bench.synth.tasks_common import TaskContext
    from common.config import load_config
    from bench.synth.config import SynthConfig
    cfg = load_config(SynthConfig, "configs/bench/default.yaml", ["render.width=64", "render.height=64"])
    scene, renders, obs, cams = build_temporal_scene(cfg, 0)
    ctx = TaskContext.__new__(TaskContext)
    ctx.obs = obs
    pid = scene.persons[0].pid
    boxes = person_boxes(ctx, pid)
    assert set(boxes) == set(renders)
    for v, frames in boxes.items():
        assert len(frames) == len(scene.times)
        for f, box in enumerate(frames):
            mask = renders[v][f].instance == pid
            if box is None:
                assert not mask.any()
            else:
                ys, xs = mask.nonzero()
                assert box == [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]
    json.dumps(boxes)  # it goes into benchmark.json


def test_motion_features_say_where_the_locator_looked_and_how_it_moved():
    from model.track import MOTION_FEATURES, PersonTrack
    where = torch.zeros(1, 1, 4, 1 + 16)  # a 4 x 4 grid, four frames of one view
    where[0, 0, 0, 1 + 5] = 1.0  # row 1, column 1
    where[0, 0, 1, 1 + 1] = 1.0  # row 0, column 1: the person went up by a cell
    where[0, 0, 2, 0] = 1.0  # the null cell: not found
    frame_mask = torch.tensor([[[True, True, True, False]]])
    m = PersonTrack.motion(where, frame_mask)[0, 0]
    assert m.shape == (4, MOTION_FEATURES)
    assert m[:, 0].tolist() == [1.0, 1.0, 0.0, 0.0]  # found
    assert m[0, 1:3].tolist() == [0.375, 0.375] and m[1, 1:3].tolist() == [0.375, 0.125]  # centres
    assert m[0, 3:5].tolist() == [0.0, 0.0]  # one cell: no spread
    assert m[1, 5:7].tolist() == [0.0, -0.25] and m[0, 7:9].tolist() == [0.0, -0.25]  # moved up
    assert m[0, 5:7].tolist() == [0.0, 0.0] and (m[3] == 0).all()  # no frame before; padding
    half = torch.zeros(1, 1, 1, 1 + 16)
    half[0, 0, 0, [1, 4]] = 0.5  # two cells of the top row
    assert torch.allclose(PersonTrack.motion(half, frame_mask[..., :1])[0, 0, 0, 3], torch.tensor(0.375))


def test_track_motion_feeds_the_state_head_and_is_off_by_default():
    torch.manual_seed(0)
    cfg = _config()
    plain = build_model(cfg)
    assert plain.track.motion_embed is None
    moving = build_model(dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, track_motion=True))).train()
    batch = with_answer_labels(random_batch(moving.cfg, **CLIPS))
    crit = CrossViewCriterion(LossConfig(track=1.0, identity=0.0))
    crit(moving(batch), batch)["loss_track"].backward()
    assert moving.track.motion_embed.weight.grad.abs().sum() > 0


def test_the_track_reads_layernormed_words_and_old_configs_keep_raw_ones():
    from common.config import from_dict
    from model.config import FusionConfig
    cfg = _config()
    assert cfg.fusion.track_word_norm and build_model(cfg).track.word_norm is not None
    stored = {k: v for k, v in dataclasses.asdict(cfg.fusion).items() if k != "track_word_norm"}
    assert from_dict(FusionConfig, stored).track_word_norm is False  # a run from before the option
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    batch = with_answer_labels(random_batch(model.cfg, **CLIPS))
    with torch.no_grad():
        base = model.forward_track(batch)["track_logits"]
        model.token_proj.weight.mul_(10.0)
        model.token_proj.bias.mul_(10.0)
        louder = model.forward_track(batch)["track_logits"]
    assert torch.allclose(base, louder, atol=1e-4)  # the words' scale no longer matters


def test_the_box_read_predicts_the_box_reads_it_and_learns_from_the_recorded_one():
    torch.manual_seed(0)
    cfg = _config()
    assert build_model(cfg).track.box_head is None and "track_box_pred" not in build_model(cfg).eval()(
        with_answer_labels(random_batch(cfg, **CLIPS)))
    cfg = dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, track_box_read=True))
    model = build_model(cfg).train()
    batch = with_answer_labels(random_batch(model.cfg, **CLIPS))
    out = model(batch)
    box = out["track_box_pred"]
    assert box.shape == (*batch["frame_mask"].shape, 4) and box.min() >= 0 and box.max() <= 1
    assert (box[..., 2:] >= box[..., :2]).all()
    assert torch.allclose(model.forward_track(batch)["track_box_pred"], box, atol=1e-6)
    # in training the state head reads the recorded box where there is one; in eval, its own
    moved = dict(batch, track_box=batch["track_box"].flip(-1).clamp(0, 1).sort(-1).values)
    shown = batch["track_box_flag"] == 1
    with torch.no_grad():
        a, b = model(batch)["track_logits"], model(moved)["track_logits"]
        assert not torch.allclose(a[shown], b[shown]) and torch.allclose(a[~shown], b[~shown], atol=1e-6)
        model.eval()
        assert torch.allclose(model(batch)["track_logits"], model(moved)["track_logits"], atol=1e-6)
    own = build_model(dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, track_box_teacher=False))).train()
    with torch.no_grad():  # without the teacher, training reads its own box too
        assert torch.allclose(own(batch)["track_logits"], own(moved)["track_logits"], atol=1e-6)
    model.train()
    crit = CrossViewCriterion(LossConfig(track=0.0, identity=0.0, track_box=1.0))
    none = dict(batch, track_box_flag=torch.full_like(batch["track_box_flag"], IGNORE))
    assert float(crit(model(none), none)["loss_track_box"]) == 0.0
    first, last = fit_steps(model, lambda: crit.loss_track_box(model(batch), batch))
    assert last < 0.5 * first


def test_the_box_loss_needs_the_box_read():
    with pytest.raises(ConfigError, match="track_box_read"):
        load_train_config(None, ["loss.track_box=1.0", "model.fusion.track=true"])
    assert load_train_config(None, ["loss.track_box=1.0", "model.fusion.track=true",
                                    "model.fusion.track_box_read=true"]).loss.track_box == 1.0


def test_a_detached_box_head_leaves_the_locator_to_its_own_losses():
    torch.manual_seed(0)
    cfg = _config()
    cfg = dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, track_box_read=True))
    batch = with_answer_labels(random_batch(cfg, **CLIPS))
    crit = CrossViewCriterion(LossConfig(track=0.0, identity=0.0, track_box=1.0))
    grads, boxes = {}, {}
    for detach in (False, True):
        torch.manual_seed(1)
        model = build_model(dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, track_box_detach=detach)))
        model.train().zero_grad()
        out = model(batch)
        crit.loss_track_box(out, batch).backward()
        grads[detach] = {name: None if p.grad is None else p.grad.abs().sum().item()
                         for name, p in model.track.named_parameters()}
        boxes[detach] = out["track_box_pred"].detach()
    # same weights, same boxes: detaching changes where the gradient goes, not the forward pass
    assert torch.allclose(boxes[False], boxes[True], atol=1e-6)
    for name in ("word_key.weight", "cell_key.1.weight", "cell_value.1.weight", "located.weight"):
        assert grads[False][name] and grads[False][name] > 0  # attached: the box loss reaches the locator
        assert not grads[True][name]                          # detached: it does not
    assert grads[True]["box_head.1.weight"] > 0
