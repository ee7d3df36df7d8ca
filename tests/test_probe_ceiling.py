"""scripts/probe_ceiling.py: the ground-truth cells say what each view shows, where it shows
it; marked images and clip frames get their view's truth; a foreign image is refused; the
unchanged training code runs on the ground-truth cache and the script writes its table."""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from common.config import load_config, save_config
from bench.format import load_benchmark
from bench.synth.captions import COLOUR_NAMES, OBJECT_KINDS
from bench.synth.config import SynthConfig
from bench.synth.generate import build_scene, generate
from inputs.items import split_images
from model.config import tiny_model_config
from training.config import TrainConfig

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")

import scripts.probe_ceiling as pc  # noqa: E402

TINY = ["n_scenes=6", "temporal.n_scenes=2", "render.width=64", "render.height=64", "workers=1",
        "tasks.per_scene=2", "split_fractions=[0.5,0.25,0.25]"]


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth_ceiling") / "bench"
    generate(load_config(SynthConfig, None, TINY), out, progress=False)
    return out


@pytest.fixture(scope="module")
def gt_cache(synth: Path, tmp_path_factory) -> Path:
    """A ground-truth cache folder holding the train split (scene rebuilds are the slow part)."""
    root = tmp_path_factory.mktemp("gt_cache")
    pc.GroundTruthCache(root).table(split_images(load_benchmark(synth / "train")))
    return root


def _block(feats: np.ndarray, name: str) -> np.ndarray:
    width = dict(pc.LAYOUT)[name]
    return feats[:, pc.OFFSET[name]:pc.OFFSET[name] + width]


def _cell_boxes(grid: int, h: int, w: int) -> list[tuple[float, float, float, float]]:
    return [(c * w / grid, r * h / grid, (c + 1) * w / grid, (r + 1) * h / grid) for r in range(grid) for c in range(grid)]


def _overlaps(cell, box) -> bool:
    return cell[0] < box[2] and box[0] < cell[2] and cell[1] < box[3] and box[1] < cell[3]


def test_cells_carry_each_persons_shirt_inside_its_box(synth: Path):
    cfg = load_config(SynthConfig, None, TINY)
    checked = 0
    for idx in range(3):
        scene, renders, obs, _ = build_scene(cfg, idx)
        for view, render in renders.items():
            feats = pc.view_features(scene, render, obs[view])
            assert feats.shape == (pc.GRID ** 2, pc.WIDTH)
            cells = _cell_boxes(pc.GRID, *render.instance.shape)
            seen = [p for p in scene.persons if obs[view]["persons"][p.pid]["seen"]]
            # the visible-person count, one-hot in every cell
            assert (_block(feats, "count").argmax(1) == len(seen)).all()
            assert (_block(feats, "count").sum(1) == 1).all()
            shirts = _block(feats, "shirt")
            for person in seen:
                rec = obs[view]["persons"][person.pid]
                if "shirt" not in rec["attrs"]:
                    continue
                colour = COLOUR_NAMES.index(person.shirt)
                inside = [i for i, c in enumerate(cells) if _overlaps(c, rec["box"])]
                assert shirts[inside, colour].max() == 1.0, f"{scene.sid} {view}: no {person.shirt} shirt cell in the box"
                checked += 1
            # and every cell with a shirt lies in the box of a seen person wearing it
            for i in np.flatnonzero(shirts.sum(1)):
                colour = COLOUR_NAMES[int(shirts[i].argmax())]
                assert any(p.shirt == colour and _overlaps(cells[i], obs[view]["persons"][p.pid]["box"]) for p in seen)
            for i in np.flatnonzero(_block(feats, "object")[:, 0]):
                kind = OBJECT_KINDS[int(_block(feats, "object_kind")[i].argmax())]
                colour = COLOUR_NAMES[int(_block(feats, "object_colour")[i].argmax())]
                assert any(o.kind == kind and o.colour == colour and obs[view]["objects"][o.oid]["visible"]
                           for o in scene.objects)
            assert _block(feats, "person").sum() >= len(seen)  # every seen person owns a cell
    assert checked > 5


def test_cache_entries_marked_images_and_frames(synth: Path, gt_cache: Path):
    cache = pc.GroundTruthCache(gt_cache)
    assert cache.identity.startswith("ground-truth-v1") and (cache.dir / "IDENTITY").is_file()
    bench = load_benchmark(synth / "train")
    table = cache.table(split_images(bench))
    assert cache.n_encoded == 0  # the fixture's entries are read back, nothing is rebuilt
    assert table.patch_tokens.shape[1:] == (pc.GRID ** 2, pc.WIDTH)
    assert np.allclose(table.pooled.float().numpy(), table.patch_tokens.float().mean(1).numpy(), atol=1e-3)

    def cells(path) -> np.ndarray:
        return table.patch_tokens[table.index[str(path)]].float().numpy()

    # the generator's own record of how many people each view / frame shows (meta.view_stats)
    seen = {(s.scene, key): stats[0] for s in bench.samples for key, stats in s.meta["view_stats"].items()}
    marked, frames = 0, {}
    for path in table.index:
        path = Path(path)
        view = path.stem.split("_m")[0]
        assert (_block(cells(path), "count").argmax(1) == seen[(path.parent.name, view)]).all(), path
        if view != path.stem:  # a marked image carries its clean view's truth
            clean = path.with_name(f"{view}.png")
            if str(clean) in table.index:
                assert np.array_equal(cells(path), cells(clean))
                marked += 1
        if "_f" in path.stem:
            frames.setdefault(path.parent.name, []).append(path)
    assert marked and frames, "the tiny benchmark needs marked images and clip frames"
    for clip in frames.values():  # each frame its own time's truth: people move between frames
        assert len({cells(p).tobytes() for p in clip}) > 1


def test_an_image_the_config_does_not_render_is_refused(synth: Path, tmp_path: Path):
    copy = tmp_path / "train"
    shutil.copytree(synth / "train", copy)
    clean = next(p for p in sorted((copy / "images").rglob("*.png")) if "_m" not in p.name)
    pixels = np.asarray(Image.open(clean).convert("RGB")).copy()
    pixels[0, 0] = 255 - pixels[0, 0]
    Image.fromarray(pixels).save(clean)
    with pytest.raises(ValueError, match="pixels equal the scene rebuilt"):
        pc.GroundTruthCache(tmp_path / "cache").table([clean])


def test_script_trains_the_model_on_ground_truth(synth: Path, gt_cache: Path, tmp_path: Path):
    cfg = TrainConfig()
    cfg.model = tiny_model_config()
    cfg.model.lm.vocab_size = 49408  # the open_clip tokenizer's ids
    cfg.data.bench_dir = str(synth)
    cfg.data.generate_config = None
    cfg.data.cache_dir = str(gt_cache)
    cfg.data.batch_size = 4
    cfg.out_dir = str(tmp_path / "runs")
    cfg.trainer.max_epochs = 1
    cfg.trainer.limit_train_batches = 2
    cfg.trainer.accelerator = "cpu"
    cfg.trainer.enable_progress_bar = False
    cfg.eval.settings = ["+0", "-1"]
    cfg.eval.val_settings = ["+0"]
    save_config(cfg, tmp_path / "tiny.yaml")
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"by_task": {"attribute": 25.0}, "acc": {"+0": {"overall": 26.0}}}))
    # a readout for the tiny tower, so the ceiling model is also scored on a predicted grid
    import torch

    from inputs.backbone import build_backbone
    from model.readout import SemanticReadout
    from pretrain.fit_readout import save_readout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tower = build_backbone(cfg.model.backbone)
    torch.manual_seed(0)
    save_readout(SemanticReadout(tower.patch_dim, pc.LAYOUT, depth=1, heads=2,
                                 grid_cells=tower.grid_size[0] * tower.grid_size[1], width=16),
                 tmp_path / "ro", {"note": "test"})
    out = tmp_path / "ceiling.json"
    assert pc.main(["--config", str(tmp_path / "tiny.yaml"), "--out", str(out), "--baseline", str(baseline),
                    "--transfer", str(tmp_path / "ro")]) == 0
    result = json.loads(out.read_text())
    assert set(result["transfer"]) == {"val", "test"} and result["transfer_readout"] == str(tmp_path / "ro")
    for figures in result["transfer"].values():
        assert figures["by_task"] and "+0" in figures["acc"]
    assert "transfer test" in result["table_md"]
    assert result["width"] == pc.WIDTH and result["identity"].startswith("ground-truth-v1")
    assert set(result["ceiling"]) == {"val", "test"}
    for figures in result["ceiling"].values():
        assert figures["by_task"] and "+0" in figures["acc"]
    assert "| attribute |" in result["table_md"] and "baseline baseline.json" in result["table_md"]
    run = Path(result["run_dir"])
    assert (run / "best.ckpt").is_file() or (run / "last.ckpt").is_file()
    # the tower's own cache is untouched: the ground truth and the predicted grid (its pooled
    # vector the cell mean, as the ground truth's) each have their own folder
    identities = sorted((p / "IDENTITY").read_text() for p in Path(cfg.data.cache_dir).iterdir() if p.is_dir())
    truth = [i for i in identities if i.startswith("ground-truth-v1")]
    predicted = [i for i in identities if i not in truth]
    assert len(truth) == 1 and len(predicted) == 1
    assert "-readout" in predicted[0] and "-only|pooled=cell-mean" in predicted[0]


def test_overrides_after_splits_stay_overrides():
    """--splits takes every word after it: a key=value among them is an override, not a split."""
    args = pc.parse_args(["--splits", "val", "trainer.max_epochs=40", "run_name=x"])
    assert args.splits == ["val"] and args.overrides == ["trainer.max_epochs=40", "run_name=x"]
    args = pc.parse_args(["seed=1", "--splits", "test"])
    assert args.splits == ["test"] and args.overrides == ["seed=1"]
    with pytest.raises(SystemExit):
        pc.parse_args(["--splits", "seed=1"])
