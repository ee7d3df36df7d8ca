"""Generate the synthetic benchmark: scenes -> renders -> observations -> verified questions.

Scenes are built in parallel (one process per core; ``workers=1`` builds them in this
process), each from its own seed, so the output depends only on the config and its seed. A
scene that fails raises ``SceneError``: one line naming the scene, its seed and the step.
Spatial scenes (``s*``) have one frame per camera; temporal scenes (``t*``, ``cfg.temporal``)
have T synchronized frames per camera, written as ``images/<scene>/<view>_fNN.png``. Everything is written to a temporary folder next to
``out`` and renamed at the end: a crash never leaves a half-written benchmark.
Layout: ``out/{train,val,test}/benchmark.json`` + ``images/``, ``out/summary.json``, and the entity
records ``out/labels/<split>.jsonl.gz`` (``bench.entities``; bench/FORMAT.md, "Entity records").
"""
from __future__ import annotations

import gzip
import json
import multiprocessing as mp
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from common.config import to_dict
from bench.constants import AXES
from bench.synth.balance import assign_letters, select
from bench.synth.config import SynthConfig
from bench.synth.entity_labels import image_entities
from bench.synth.marks import draw_marks, mark_key
from bench.synth.observe import observe_view
from bench.synth.questions import scene_questions
from bench.synth.renderer import camera_rays, render
from bench.synth.scene import sample_scene
from bench.synth.scene_temporal import sample_temporal_scene
from bench.synth.tasks import TASKS
from bench.synth.tasks_common import TaskContext

SPLITS = ("train", "val", "test")
PNG_OPTS = {"format": "PNG", "compress_level": 6}
SEED_TAGS = {"spatial": 2, "temporal": 4}  # a scene's seed is [cfg.seed, tag, index]
_DEBUG = False  # generate(debug=True): a scene's own exception goes through, with its traceback


class SceneError(RuntimeError):
    """A scene the generator could not build; the message is one line naming the scene, its
    seed and the step (``python -m bench generate ... workers=1 --debug`` shows the traceback)."""


def _no_step(step: str) -> None:
    pass


def scene_splits(cfg, n: int | None = None, tag: int = 1, extra_train: int = 0) -> list[str]:
    """Split name per scene index: a seeded permutation of the first ``n`` cut by
    ``split_fractions``, then ``extra_train`` more indices, all in train.

    Args:
        n: number of scenes (default ``cfg.n_scenes``); tag: seed tag (temporal scenes use 5);
        extra_train: scenes after the n that go to train only: the first n keep their splits
            whatever its value.
    """
    n = cfg.n_scenes if n is None else n
    order = np.random.default_rng([cfg.seed, tag]).permutation(n)
    bounds = np.cumsum([round(f * n) for f in cfg.split_fractions[:2]])
    out = [""] * n
    for rank, idx in enumerate(order):
        out[idx] = SPLITS[0] if rank < bounds[0] else SPLITS[1] if rank < bounds[1] else SPLITS[2]
    return out + [SPLITS[0]] * extra_train


def build_scene(cfg, idx: int, step=_no_step):
    """The scene, its renders and observations for scene index ``idx`` (deterministic).

    ``step(name)`` is told each step as it starts (for the error that names it)."""
    step("sampling the scene")
    rng = np.random.default_rng([cfg.seed, SEED_TAGS["spatial"], idx])
    scene = sample_scene(rng, cfg, f"s{idx:06d}")
    step("rendering")
    entities = scene.entities()
    renders = {c.view_id: render(entities, c, cfg.render, scene.shadows()) for c in scene.cameras}
    step("observing the views")
    obs = {v: observe_view(r, scene, cfg.observe) for v, r in renders.items()}
    return scene, renders, obs, rng


def build_temporal_scene(cfg, idx: int, step=_no_step):
    """A temporal scene, its renders and observations per view and frame (deterministic)."""
    step("sampling the scene")
    rng = np.random.default_rng([cfg.seed, SEED_TAGS["temporal"], idx])
    scene = sample_temporal_scene(rng, cfg, f"t{idx:06d}")
    step("rendering")
    renders = {c.view_id: [] for c in scene.cameras}
    rays = {c.view_id: camera_rays(c) for c in scene.cameras}  # the same for every frame
    for t in scene.times:
        entities, shadows = scene.entities(t), scene.shadows(t)
        for c in scene.cameras:
            renders[c.view_id].append(render(entities, c, cfg.render, shadows, rays[c.view_id]))
    step("observing the views")
    obs = {v: [observe_view(r, scene, cfg.observe) for r in rs] for v, rs in renders.items()}
    return scene, renders, obs, rng


def _dense(cfg, split: str) -> bool:
    """Whether a scene of ``split`` offers every question it supports (``train_questions``)."""
    return split == SPLITS[0] and cfg.train_questions == "dense"


def _spatial_entities(scene, obs: dict) -> dict[str, list[dict]]:
    """Image stem ("cam2") -> entity records (``bench.entities``) of a spatial scene's views."""
    return {v: image_entities(scene, o, 0.0) for v, o in obs.items()}


def _temporal_entities(scene, obs: dict) -> dict[str, list[dict]]:
    """Image stem ("cam0_f03") -> entity records of a temporal scene's views and frames."""
    return {f"{v}_f{f:02d}": image_entities(scene, o, t) for v, os_ in obs.items()
            for f, (o, t) in enumerate(zip(os_, scene.times))}


def scene_entities(cfg, sid: str) -> dict[str, list[dict]]:
    """Image stem ("cam2", "cam0_f03") -> entity records, for a scene rebuilt from its generator config
    (what ``<bench>/labels/<split>.jsonl.gz`` holds for that scene)."""
    if sid[:1] not in ("s", "t") or not sid[1:].isdigit():
        raise ValueError(f"scene id {sid!r} is not a synthetic scene id (s000123 / t000012)")
    if sid[0] == "s":
        scene, _, obs, _ = build_scene(cfg, int(sid[1:]))
        return _spatial_entities(scene, obs)
    scene, _, obs, _ = build_temporal_scene(cfg, int(sid[1:]))
    return _temporal_entities(scene, obs)


def _view_stats(obs: dict) -> list[int]:
    """People seen, people visible, visible people that are partly occluded."""
    return [sum(r["seen"] for r in obs["persons"].values()), sum(r["visible"] for r in obs["persons"].values()),
            sum(r["visible"] and r["frac"] < 0.9 for r in obs["persons"].values())]


def _temporal_job(cfg, idx: int, split: str, root: str, step=_no_step) -> dict:
    scene, renders, obs, rng = build_temporal_scene(cfg, idx, step)
    step("making and verifying questions")
    ctx = TaskContext(scene, obs, {c.view_id: c for c in scene.cameras}, rng, cfg, cfg.options.mode == "cvbench",
                      _dense(cfg, split))
    records = scene_questions(ctx, [TASKS[t] for t in cfg.temporal.enabled], cfg.temporal.per_scene)
    step("writing the images")
    img_dir = Path(root) / split / "images" / scene.sid
    img_dir.mkdir(parents=True, exist_ok=True)
    for v, outs in renders.items():
        for f, out in enumerate(outs):
            Image.fromarray(out.rgb).save(img_dir / f"{v}_f{f:02d}.png", **PNG_OPTS)
    view_stats = {f"{v}_f{f:02d}": _view_stats(o) for v, os_ in obs.items() for f, o in enumerate(os_)}
    for rec in records:
        for r in [rec] + rec.get("alternatives", []):  # selection may keep an alternative option set
            r["meta"]["view_stats"] = view_stats
    entities = _temporal_entities(scene, obs)
    return {"idx": idx, "sid": scene.sid, "split": split, "records": records, "times": scene.times, "entities": entities,
            "cameras": [{"view_id": c.view_id, **c.to_json()} for c in scene.cameras],
            "persons_per_image": [st[0] for st in view_stats.values()],
            "occluded": sum(st[2] for st in view_stats.values()), "visible": sum(st[1] for st in view_stats.values())}


def _scene_job(args) -> dict:
    """One scene's job; any failure becomes a one-line ``SceneError`` naming the scene, its seed
    and the step (a worker's traceback would reach the user as a pool traceback)."""
    cfg, idx, split, root, axis = args
    at = ["starting"]
    try:
        return _scene_steps(cfg, idx, split, root, axis, lambda name: at.__setitem__(0, name))
    except Exception as err:  # noqa: BLE001 - reported as one line, with what to rerun
        if _DEBUG:
            raise
        sid = f"{'t' if axis == 'temporal' else 's'}{idx:06d}"
        raise SceneError(f"{axis} scene {sid} (seed [{cfg.seed}, {SEED_TAGS[axis]}, {idx}]) failed while {at[0]}: "
                         f"{type(err).__name__}: {' '.join(str(err).split())}") from None


def _scene_steps(cfg, idx: int, split: str, root: str, axis: str, step) -> dict:
    if axis == "temporal":
        return _temporal_job(cfg, idx, split, root, step)
    scene, renders, obs, rng = build_scene(cfg, idx, step)
    step("making and verifying questions")
    ctx = TaskContext(scene, obs, {c.view_id: c for c in scene.cameras}, rng, cfg, cfg.options.mode == "cvbench",
                      _dense(cfg, split))
    records = scene_questions(ctx, [TASKS[t] for t in cfg.tasks.enabled], cfg.tasks.per_scene)
    step("writing the images")
    img_dir = Path(root) / split / "images" / scene.sid
    img_dir.mkdir(parents=True, exist_ok=True)
    for v, out in renders.items():
        Image.fromarray(out.rgb).save(img_dir / f"{v}.png", **PNG_OPTS)
    view_stats = {v: _view_stats(o) for v, o in obs.items()}
    for rec in records:
        rec["meta"]["view_stats"] = view_stats
    entities = _spatial_entities(scene, obs)
    return {"idx": idx, "sid": scene.sid, "split": split, "records": records, "times": [0.0], "entities": entities,
            "cameras": [{"view_id": c.view_id, **c.to_json()} for c in scene.cameras],
            "persons_per_image": [st[0] for st in view_stats.values()],
            "occluded": sum(st[2] for st in view_stats.values()), "visible": sum(st[1] for st in view_stats.values())}


def _marks_job(args) -> int:
    root, split, sid, mark_sets = args
    img_dir = Path(root) / split / "images" / sid
    try:
        for view_id, key, marks in mark_sets:
            base = Image.open(img_dir / f"{view_id}.png")
            draw_marks(base, marks).save(img_dir / f"{view_id}_m{key}.png", **PNG_OPTS)
    except Exception as err:  # noqa: BLE001
        if _DEBUG:
            raise
        raise SceneError(f"scene {sid} ({split}) failed while drawing marks: {type(err).__name__}: "
                         f"{' '.join(str(err).split())}") from None
    return len(mark_sets)


def _one_thread() -> None:
    torch.set_num_threads(1)  # one process per core; intra-op threads would only contend


class _InProcess:
    """The pool's ``imap`` run in this process, one thread (``workers=1``): no fork, and a
    failure's traceback (with ``debug``) is this process's own."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        _one_thread()  # as a worker: the same bytes whatever the caller's thread count
        return self

    def __exit__(self, *exc) -> None:
        torch.set_num_threads(self.threads)

    def imap(self, fn, items, chunksize: int = 1):
        return map(fn, items)


def _sample(rec: dict, qid: str, cams: list[dict], times: list[float]) -> tuple[dict, list[tuple[str, str, list[dict]]]]:
    """The benchmark sample of a record and the marked images it needs (temporal: no marks)."""
    sid, views, needed = rec["scene"], [], []
    for cam in cams:
        v = cam["view_id"]
        marks = [m for m in rec["marks"] if m["view_id"] == v]
        image = f"images/{sid}/{v}.png"
        if marks:
            key = mark_key(v, marks)
            image = f"images/{sid}/{v}_m{key}.png"
            needed.append((v, key, marks))
        camera = {k: cam[k] for k in ("K", "R", "t", "width", "height")}
        frames = [{"t": 0.0, "image": image}]
        if rec["axis"] == "temporal":
            frames = [{"t": t, "image": f"images/{sid}/{v}_f{f:02d}.png"} for f, t in enumerate(times)]
        views.append({"view_id": v, "frames": frames, "camera": camera})
    meta = dict(rec["meta"])
    meta["verification"] = dict(meta["verification"], oracle_correct=rec["oracle_correct"], oracle_key=rec["oracle_key"])
    sample = {"id": qid, "task": rec["task"], "subset": rec["subset"], "axis": rec["axis"],
              "granularity": rec["granularity"], "scene": sid, "views": views, "gt_views": rec["gt_views"],
              "extra_views": rec["extra_views"], "question": rec["question"], "options": rec["options"],
              "answer": rec["answer"], "distractors": rec["distractors"], "evidence": rec["evidence"],
              "marks": rec["marks"], "meta": meta}
    return sample, needed


def partial_dir(out: str | Path) -> Path:
    """Where ``generate(..., resume=True)`` keeps a generation's finished scenes until it ends."""
    out = Path(out)
    return out.parent / f".{out.name}.partial"


def _open_partial(tmp: Path, cfg) -> set[str]:
    """The finished scene jobs kept in ``tmp`` (a resumable generation's folder), after checking
    that they were made from the same config (``workers`` aside: the bytes do not depend on it);
    creates the folder if it is not there."""
    recorded = json.dumps({k: v for k, v in to_dict(cfg).items() if k != "workers"}, sort_keys=True)
    stamp = tmp / "config.json"
    if tmp.exists():
        if not stamp.is_file() or stamp.read_text() != recorded:
            raise FileExistsError(f"{tmp} holds a partial generation of another config: remove it to start again")
        return {p.stem for p in (tmp / "jobs").glob("*.json")}
    (tmp / "jobs").mkdir(parents=True)
    stamp.write_text(recorded)
    return set()


def _job_name(job: tuple) -> str:
    return f"{job[4]}-{job[1]:06d}"


def generate(cfg, out: str | Path, overwrite: bool = False, progress: bool = True, debug: bool = False,
             resume: bool = False) -> dict:
    """Write the benchmark splits under ``out``; returns the summary (also out/summary.json).

    With ``resume``, each finished scene is kept in ``partial_dir(out)`` as it comes, and a later
    call with the same config builds only the scenes that are not there (the output has the same
    bytes); the folder stays when a run fails or is stopped and goes when the benchmark is written.

    Raises:
        SceneError: a scene failed (one line naming it, its seed and the step); with ``debug``
            the scene's own exception instead (``workers=1`` keeps its traceback in-process).
        FileExistsError: ``out`` exists without ``overwrite``; or, with ``resume``, the partial
            folder holds another config's scenes.
    """
    global _DEBUG
    _DEBUG = debug  # forked workers inherit it
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists (pass --overwrite to replace it)")
    t0 = time.time()
    if resume:
        tmp = partial_dir(out)
        done = _open_partial(tmp, cfg)
    else:
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        done = set()
    splits = scene_splits(cfg, extra_train=cfg.extra_train_scenes)
    t_splits = scene_splits(cfg, cfg.temporal.n_scenes, tag=5, extra_train=cfg.temporal.extra_train_scenes)
    # temporal scenes first: they are the long jobs, so the pool ends with short ones
    jobs = [(cfg, i, split, str(tmp), "temporal") for i, split in enumerate(t_splits)]
    jobs += [(cfg, i, split, str(tmp), "spatial") for i, split in enumerate(splits)]
    workers = cfg.workers or os.cpu_count() or 1
    ctx = mp.get_context("fork")
    try:
        with (ctx.Pool(workers, initializer=_one_thread) if workers > 1 else _InProcess()) as pool:
            kept = {name: json.loads((tmp / "jobs" / f"{name}.json").read_text()) for name in sorted(done)}
            todo = [job for job in jobs if _job_name(job) not in kept]
            for job, result in zip(todo, tqdm(pool.imap(_scene_job, todo, chunksize=1), total=len(jobs),
                                              initial=len(jobs) - len(todo), disable=not progress,
                                              desc="scenes", unit="scene")):
                if resume:  # written whole, then renamed: a stopped run never leaves half a scene
                    path = tmp / "jobs" / f"{_job_name(job)}.json"
                    path.with_suffix(".part").write_text(json.dumps(result))
                    os.replace(path.with_suffix(".part"), path)
                    result = json.loads(path.read_text())  # what a resumed run reads: the same values
                kept[_job_name(job)] = result
            results = [kept[_job_name(job)] for job in jobs]
            summary = {"name": cfg.name, "seed": cfg.seed, "splits": {}}
            mark_jobs = []
            for s_idx, split in enumerate(SPLITS):
                res = [r for r in results if r["split"] == split]
                records = []
                # each axis is balanced on its own, with its own seeded stream: the spatial
                # questions do not change when the temporal part does (and vice versa)
                # the temporal axis, where every question is MVN and single views often narrow it
                # to two options, uses the joint value / oracle caps and option-set alternatives
                for axis, tag in (("spatial", 3), ("temporal", 6)):
                    rng = np.random.default_rng([cfg.seed, tag, s_idx])
                    recs = [rec for r in res for rec in r["records"] if rec["axis"] == axis]
                    if split == "train" and cfg.train_selection == "verified":
                        kept = list(recs)  # every verified question (each with its first option set)
                    elif axis == "spatial":
                        kept = select(recs, cfg, rng)
                    else:
                        kept = select(recs, cfg, rng, joint_caps=True, max_task_share=cfg.temporal.max_task_share)
                    assign_letters(kept, cfg, rng)
                    records += kept
                cams = {r["sid"]: r["cameras"] for r in res}
                times = {r["sid"]: r["times"] for r in res}
                per_scene: dict[str, list] = {}
                samples, counter = [], Counter()
                for rec in sorted(records, key=lambda r: (r["scene"], list(TASKS).index(r["task"]))):
                    counter[rec["scene"]] += 1
                    sample, needed = _sample(rec, f"{rec['scene']}-q{counter[rec['scene']] - 1}", cams[rec["scene"]],
                                             times[rec["scene"]])
                    samples.append(sample)
                    for item in needed:
                        per_scene.setdefault(rec["scene"], {})[item[1] + item[0]] = item
                mark_jobs += [(str(tmp), split, sid, [items[k] for k in sorted(items)]) for sid, items in sorted(per_scene.items())]
                images = sorted({f["image"] for s in samples for v in s["views"] for f in v["frames"]})
                if samples:  # a split without questions (a split fraction of 0, say) gets no folder
                    _write_split(tmp / split, cfg, split, samples)
                _write_labels(tmp / "labels", split, res, {s["scene"] for s in samples})
                summary["splits"][split] = {
                    "scenes": len(res), "questions": len(samples), "unique_images": len(images),
                    "by_task": dict(sorted(Counter(s["task"] for s in samples).items())),
                    "by_axis": {axis: {"questions": sum(s["axis"] == axis for s in samples),
                                       "unique_images": len({f["image"] for s in samples if s["axis"] == axis
                                                             for v in s["views"] for f in v["frames"]})}
                                for axis in AXES},
                    "persons_per_image": float(np.mean([n for r in res for n in r["persons_per_image"]] or [0])),
                    "occlusion_rate": sum(r["occluded"] for r in res) / max(sum(r["visible"] for r in res), 1),
                    "referenced": images}
            list(tqdm(pool.imap(_marks_job, mark_jobs, chunksize=4), total=len(mark_jobs), disable=not progress,
                      desc="marks", unit="scene"))
        for split, info in summary["splits"].items():  # drop renders no question uses
            referenced = set(info.pop("referenced"))
            for path in sorted((tmp / split / "images").rglob("*.png")):
                if str(path.relative_to(tmp / split)) not in referenced:
                    path.unlink()
            if not info["questions"]:
                shutil.rmtree(tmp / split, ignore_errors=True)
        summary["n_questions"] = sum(s["questions"] for s in summary["splits"].values())
        summary["unique_images"] = sum(s["unique_images"] for s in summary["splits"].values())
        summary["by_task"] = dict(sorted(sum((Counter(s["by_task"]) for s in summary["splits"].values()), Counter()).items()))
        # timing stays out of the file: the same config and seed must give the same bytes
        if resume:
            shutil.rmtree(tmp / "jobs")
            (tmp / "config.json").unlink()
        (tmp / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        summary["seconds"] = round(time.time() - t0, 1)
        summary["workers"] = workers
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        if not resume:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


def _write_labels(folder: Path, split: str, results: list[dict], scenes: set[str]) -> None:
    """Per-entity labels of every image of the split's scenes that questions use
    (``bench.entities``; bench/FORMAT.md, "Entity records"), one scene a line: outside the split folders, so a split
    handed to a model or an evaluator carries no label; training reads only train's."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"scene": r["sid"], "images": r["entities"]}, separators=(",", ":"))
             for r in sorted(results, key=lambda r: r["sid"]) if r["sid"] in scenes]
    data = "".join(line + "\n" for line in lines).encode()
    (folder / f"{split}.jsonl.gz").write_bytes(gzip.compress(data, compresslevel=6, mtime=0))  # same bytes per seed


def recorded_config(cfg, split: str) -> dict:
    """The generator config a split's benchmark.json records: ``cfg`` without the keys that did
    not shape that split and hold their defaults. ``train_questions`` shapes only train, so val
    and test keep their bytes whatever its value; at the defaults every split keeps the bytes it
    had before these keys existed. Left-out keys load back as their defaults (``from_dict``)."""
    doc, default = to_dict(cfg), SynthConfig()
    if split != SPLITS[0] or cfg.train_questions == default.train_questions:
        doc.pop("train_questions")
    if cfg.question_template == default.question_template:
        doc.pop("question_template")
    return doc


def _write_split(folder: Path, cfg, split: str, samples: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"name": f"{cfg.name}-{split}", "split": split, "config": recorded_config(cfg, split), "samples": samples}
    (folder / "benchmark.json").write_text(json.dumps(doc, indent=1) + "\n")
