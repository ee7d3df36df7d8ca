"""How much do the cached backbone features carry? Direct-supervision probes on the synthetic
benchmark, trained on its train split and scored on its val split.

    python -m scripts.probe_features [--config configs/default.yaml] [--out runs/probe_features.json] [key=value ...]

Nine probes, each a small classifier on frozen features (no question, no language head):

* ``count``: how many people an image shows, from all its patch tokens (a per-cell MLP whose
  logits are averaged over the grid). Labels: the generator's per-camera counts in the
  ``meta.observations`` of count_in_view and dedup_count questions; counts above 7 become 7.
* ``count_every_image``: the same counter on every image of the split (spatial views with and
  without marks, every clip frame), labelled from the generator's per-view record of the people
  it saw (``meta.view_stats``, the figure count_in_view asks for): about ten times the images of
  ``count``, whose labels exist only where a counting question was kept (116 val images on the
  default benchmark, one image 0.9 points, and 804 train images for the counter to learn from).
* ``shirt_colour``: the shirt colour of a marked person, from a 2x2 RoIAlign of the patch
  grid in the mark's box (a linear classifier). Labels: the shirts that attribute questions
  record for a scene's people, joined with every mark of that person in that scene.
* ``jump`` / ``hand``: the per-frame state the temporal counting questions count (is the
  person airborne; is the hand up), from all the patch tokens of the frame (the count probe's
  DeepSets model). Labels: each (view, frame) on which the generator saw the asked person, in
  the ``meta.observations`` of repetition_count / limb_repetition_count questions. The frame
  is not told which person is asked, so the probe reads "someone in it is airborne"; in these
  clips the asked person is the one who jumps or waves.
* ``jump_person`` / ``hand_person``: the same states told where the asked person is: a 2x2
  RoIAlign in the box of their visible pixels on that frame (``meta.person_boxes``; a linear
  classifier, as ``posture``), on every frame where the state is recorded and the person shows.
  What the person track's state head has to read once its locator has found the person.
* ``shirt_colour_marks``: the same probe on every person mark of a spatial image, labelled from
  the rebuilt scene (as ``posture``): about eight times as many val marks as ``shirt_colour``,
  whose labels exist only where an attribute question recorded the shirt (35 val marks on the
  default benchmark: one mark is 2.9 points). A mark whose torso the view hides keeps its
  person's shirt, so this probe's ceiling is a little under 100 %.
* ``posture``: the whole-body posture (bench.entities.POSTURES: standing, crouching,
  sitting, reaching, foot up, ...) of a marked person, from the same 2x2 RoIAlign (linear).
  Labels: each spatial scene is rebuilt from the benchmark's stored generator config and seed
  (scenes are deterministic), and every person mark is joined with that person's pose.

With ``model.backbone.pixel_cells`` > 0 each probe also runs on the backbone tokens alone and
on the pixel cells alone, so a weak tower and a strong one can be told apart. The majority
class of the train labels is the floor to beat. The figures say whether a visual task can be
learnt from the features at all before a whole model is trained on them: the full model sees
these labels only through multiple-choice answers, which is much weaker supervision.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")

from inputs.view_counts import MAX_COUNT  # noqa: E402  (counts above it share its class)


def count_labels(bench) -> dict[str, int]:
    """Absolute image path -> number of people the generator saw in it."""
    labels: dict[str, int] = {}
    for s in bench.samples:
        if s.task not in ("count_in_view", "dedup_count"):
            continue
        obs = (s.meta or {}).get("observations", {})
        for view in s.views:
            seen = obs.get(view.view_id, {}).get("seen")
            if seen is None:
                continue
            n = len(seen) if isinstance(seen, list) else int(seen)
            for frame in view.frames:
                labels[str(bench.image_path(frame.image).resolve())] = min(n, MAX_COUNT)
    return labels


def count_every_image_labels(bench) -> dict[str, int]:
    """Absolute image path -> number of people the generator saw in it (capped at MAX_COUNT),
    for every image of every sample that carries ``meta.view_stats`` (inputs/view_counts.py:
    a spatial view by its view id, a marked copy showing the same people; a clip frame by its
    file stem)."""
    from inputs.view_counts import image_count
    labels: dict[str, int] = {}
    for s in bench.samples:
        stats = (s.meta or {}).get("view_stats")
        if not stats:
            continue
        for view in s.views:
            for frame in view.frames:
                n = image_count(s.meta, view.view_id, frame.image, len(view.frames))
                if n is None:
                    raise ValueError(f"sample {s.id}: meta.view_stats has no entry for image {frame.image} "
                                     f"(view {view.view_id}; keys {sorted(stats)[:4]}...)")
                labels[str(bench.image_path(frame.image).resolve())] = n
    return labels


TEMPORAL_STATES = {"jump": "repetition_count", "hand": "limb_repetition_count"}


def asked_person_frames(bench, task: str):
    """(absolute image path, the asked person's state 0 / 1, their visible box or None) on every
    frame of ``task``'s questions where the generator recorded the state (``meta.observations``;
    the box from ``meta.person_boxes``, None where no pixel shows or none is recorded)."""
    for s in bench.samples:
        if s.task != task:
            continue
        meta = s.meta or {}
        obs, boxes = meta.get("observations", {}), meta.get("person_boxes") or {}
        for view in s.views:
            states = obs.get(view.view_id, {}).get("obs") or []
            view_boxes = boxes.get(view.view_id) or []
            for j, (frame, state) in enumerate(zip(view.frames, states)):
                if state is not None:
                    box = view_boxes[j] if j < len(view_boxes) else None
                    yield str(bench.image_path(frame.image).resolve()), int(state), box


def frame_state_labels(bench, task: str) -> dict[str, int]:
    """Absolute image path -> the asked person's state (0 / 1) on that frame, over ``task``'s
    questions, wherever the generator saw the person (a frame seen in two questions keeps one)."""
    return {path: state for path, state, _ in asked_person_frames(bench, task)}


def person_state_labels(bench, task: str) -> list[tuple[str, tuple[float, float, float, float], int]]:
    """(image path, the asked person's visible box, state 0 / 1) on every frame of ``task``'s
    questions where the generator recorded the state and the person shows pixels
    (``meta.person_boxes``); a (frame, box) seen in two questions keeps one row."""
    rows = {}
    for path, state, box in asked_person_frames(bench, task):
        if box is not None:
            rows.setdefault((path, tuple(box)), state)
    return [(*key, state) for key, state in rows.items()]


def shirt_labels(bench) -> list[tuple[str, tuple[float, float, float, float], str]]:
    """(image path, mark box, shirt colour) for every mark of a person whose shirt is known."""
    shirts: dict[tuple[str, int], str] = {}
    for s in bench.samples:
        if s.task != "attribute":
            continue
        for view_obs in (s.meta or {}).get("observations", {}).values():
            for pid, person in view_obs.get("people", {}).items():
                if person.get("shirt"):
                    shirts[(s.scene, int(pid))] = person["shirt"]
    rows, seen = [], set()
    for s in bench.samples:
        frames = {(v.view_id, f.t): f.image for v in s.views for f in v.frames}
        for mark in s.marks:
            colour = shirts.get((s.scene, mark.entity)) if mark.entity is not None else None
            image = frames.get((mark.view_id, mark.t))
            if colour is None or image is None:
                continue
            key = (str(bench.image_path(image).resolve()), tuple(mark.box))
            if key not in seen:
                seen.add(key)
                rows.append((key[0], key[1], colour))
    return rows


def mark_labels(bench_file: Path, bench, attributes: dict) -> dict[str, list[tuple[str, tuple[float, float, float, float], str]]]:
    """Per name in ``attributes`` (name -> function of a scene person): (image path, mark box,
    label) for every person mark on a spatial image of ``bench``. Each spatial scene is rebuilt
    once from the stored generator config and seed, whatever the number of attributes."""
    import numpy as np

    from common.config import from_dict
    from bench.synth.config import SynthConfig
    from bench.synth.scene import sample_scene
    doc = json.loads(bench_file.read_text())
    rows: dict[str, list] = {name: [] for name in attributes}
    if "config" not in doc:
        return rows
    synth = from_dict(SynthConfig, doc["config"])
    people: dict[str, dict] = {}
    seen = set()
    for s in bench.samples:
        if s.axis != "spatial" or not s.scene.startswith("s"):
            continue
        if s.scene not in people:
            scene = sample_scene(np.random.default_rng([synth.seed, 2, int(s.scene[1:])]), synth, s.scene)
            people[s.scene] = {p.pid: p for p in scene.persons}
        frames = {(v.view_id, f.t): f.image for v in s.views for f in v.frames}
        for mark in s.marks:
            person = people[s.scene].get(mark.entity) if mark.entity else None
            image = frames.get((mark.view_id, mark.t))
            if person is None or image is None:
                continue
            key = (str(bench.image_path(image).resolve()), tuple(mark.box))
            if key not in seen:
                seen.add(key)
                for name, attribute in attributes.items():
                    rows[name].append((key[0], key[1], attribute(person)))
    return rows


def _posture(person) -> str:
    from bench.synth.captions import posture_of
    return posture_of(person.pose)


def _shirt(person) -> str:
    return person.shirt


def posture_labels(bench_file: Path, bench) -> list[tuple[str, tuple[float, float, float, float], str]]:
    """(image path, mark box, posture) for every person mark on a spatial image of ``bench``."""
    return mark_labels(bench_file, bench, {"posture": _posture})["posture"]


def shirt_mark_labels(bench_file: Path, bench) -> list[tuple[str, tuple[float, float, float, float], str]]:
    """(image path, mark box, shirt colour) for every person mark on a spatial image of ``bench``
    (the scene's truth: a mark whose torso the view hides keeps its person's shirt)."""
    return mark_labels(bench_file, bench, {"shirt": _shirt})["shirt"]


def _standardise(train: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    dims = tuple(range(train.dim() - 1))
    mu, sd = train.mean(dims), train.std(dims) + 1e-4
    return [(x - mu) / sd for x in (train, *others)]


def _fit(model: torch.nn.Module, forward, x_tr, y_tr, x_va, y_va, epochs: int, seed: int) -> dict:
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    for _ in range(epochs):
        perm = torch.randperm(len(x_tr))
        for i in range(0, len(x_tr), 64):
            b = perm[i:i + 64]
            loss = F.cross_entropy(forward(x_tr[b]), y_tr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        p_tr, p_va = forward(x_tr).argmax(-1), forward(x_va).argmax(-1)
    return {"train_acc": 100 * (p_tr == y_tr).float().mean().item(),
            "val_acc": 100 * (p_va == y_va).float().mean().item(),
            "pred_val": p_va}


def probe_count(tokens_tr, y_tr, tokens_va, y_va, epochs: int, seed: int) -> dict:
    """A DeepSets counter: a per-cell MLP, summed over the grid, then an MLP to the count."""
    tokens_tr, tokens_va = _standardise(tokens_tr, tokens_va)
    torch.manual_seed(seed)
    n_cls, hidden = MAX_COUNT + 1, 64
    pos = torch.nn.Parameter(torch.zeros(tokens_tr.shape[1], hidden))  # where a cell is
    phi = torch.nn.Sequential(torch.nn.Linear(tokens_tr.shape[-1], hidden), torch.nn.GELU(),
                              torch.nn.Linear(hidden, hidden), torch.nn.GELU())
    rho = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, n_cls))
    model = torch.nn.ModuleDict({"phi": phi, "rho": rho})
    model.register_parameter("pos", pos)
    scale = 1.0 / tokens_tr.shape[1] ** 0.5
    res = _fit(model, lambda x: rho((phi(x) + pos).sum(1) * scale), tokens_tr, y_tr, tokens_va, y_va, epochs, seed)
    res["val_within_one"] = 100 * (res.pop("pred_val") - y_va).abs().le(1).float().mean().item()
    return res


def probe_linear(x_tr, y_tr, x_va, y_va, n_cls: int, epochs: int, seed: int) -> dict:
    x_tr, x_va = _standardise(x_tr, x_va)
    torch.manual_seed(seed)
    model = torch.nn.Linear(x_tr.shape[-1], n_cls)
    res = _fit(model, model, x_tr, y_tr, x_va, y_va, epochs, seed)
    res.pop("pred_val")
    return res


def roi_features(table, rows, grid: int) -> torch.Tensor:
    """(N, 4 C): 2x2 RoIAlign of each row's box on its image's patch grid, in one call."""
    from torchvision.ops import roi_align
    images = list(dict.fromkeys(table.index[path] for path, _, _ in rows))
    slot = {image: i for i, image in enumerate(images)}
    tokens = table.patch_tokens[images].float()  # (I, P, C)
    fmaps = tokens.transpose(1, 2).reshape(len(images), -1, grid, grid)
    rois = []
    for path, box, _ in rows:
        h, w = table.sizes[path]
        scale = torch.tensor([grid / w, grid / h, grid / w, grid / h])
        rois.append(torch.cat([torch.tensor([float(slot[table.index[path]])]),
                               torch.tensor(box, dtype=torch.float32) * scale]))
    return roi_align(fmaps, torch.stack(rois), output_size=2, aligned=True).flatten(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--out", default="runs/probe_features.json")
    parser.add_argument("--epochs", type=int, default=40, help="probe training epochs")
    parser.add_argument("--held-out", default="val", help="split the probes are scored on")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)

    from bench.format import load_benchmark
    from training.config import load_train_config
    from training.run import build_components, ensure_benchmark

    cfg = load_train_config(args.config, args.overrides)
    ensure_benchmark(cfg)
    cache, _ = build_components(cfg)
    root = Path(cfg.data.bench_dir)
    train, held = (load_benchmark(root / split, check_images=False) for split in ("train", args.held_out))
    counts_tr, counts_va = count_labels(train), count_labels(held)
    every_tr, every_va = count_every_image_labels(train), count_every_image_labels(held)
    shirts_tr, shirts_va = shirt_labels(train), shirt_labels(held)
    per_mark = {"posture": _posture, "shirt": _shirt}  # one scene rebuild per split for both
    tr = mark_labels(root / "train" / "benchmark.json", train, per_mark)
    va = mark_labels(root / args.held_out / "benchmark.json", held, per_mark)
    postures_tr, postures_va, marks_tr, marks_va = tr["posture"], va["posture"], tr["shirt"], va["shirt"]
    if not counts_tr or not counts_va:
        raise SystemExit(f"{root}: no count labels in train/{args.held_out} (needs count_in_view or "
                         "dedup_count questions with meta.observations, as the synthetic generator writes)")
    states = {name: (frame_state_labels(train, task), frame_state_labels(held, task))
              for name, task in TEMPORAL_STATES.items()}
    person_states = {f"{name}_person": (person_state_labels(train, task), person_state_labels(held, task))
                     for name, task in TEMPORAL_STATES.items()}
    paths = sorted(set(counts_tr) | set(counts_va) | set(every_tr) | set(every_va) | {r[0] for r in shirts_tr + shirts_va + marks_tr + marks_va + postures_tr + postures_va}
                   | {p for pair in states.values() for labels in pair for p in labels}
                   | {r[0] for pair in person_states.values() for rows in pair for r in rows})
    table = cache.table(paths, desc="encoding probe images")
    n_patch = table.patch_tokens.shape[1]
    grid = int(round(n_patch ** 0.5))
    tower_dim = cfg.model.patch_dim - 3 * cfg.model.backbone.pixel_cells ** 2
    subsets = {"all": slice(None)}
    if cfg.model.backbone.pixel_cells:
        subsets.update(tokens=slice(0, tower_dim), pixels=slice(tower_dim, None))

    result: dict = {"backbone": cache.identity, "held_out": args.held_out, "epochs": args.epochs}

    def tok(labels):
        idx = [table.index[p] for p in labels]
        return table.patch_tokens[idx].float(), torch.tensor(list(labels.values()))

    for probe, (labels_tr, labels_va) in {"count": (counts_tr, counts_va), "count_every_image": (every_tr, every_va),
                                          **states}.items():
        if not labels_tr or not labels_va:
            continue
        x_tr, y_tr = tok(labels_tr)
        x_va, y_va = tok(labels_va)
        majority = Counter(y_tr.tolist()).most_common(1)[0][0]
        res = {"n_train": len(y_tr), "n_val": len(y_va),
               "majority_val_acc": 100 * (y_va == majority).float().mean().item()}
        for name, sl in subsets.items():
            res[name] = probe_count(x_tr[..., sl], y_tr, x_va[..., sl], y_va, args.epochs, cfg.seed)
            if not probe.startswith("count"):
                res[name].pop("val_within_one")  # a two-class state: every answer is within one
        result[probe] = res

    C = table.patch_tokens.shape[-1]
    for probe, (rows_tr, rows_va) in {"shirt_colour": (shirts_tr, shirts_va),
                                      "shirt_colour_marks": (marks_tr, marks_va),
                                      "posture": (postures_tr, postures_va), **person_states}.items():
        if not rows_tr or not rows_va:
            continue
        classes = sorted({r[2] for r in rows_tr + rows_va})
        f_tr, f_va = roi_features(table, rows_tr, grid), roi_features(table, rows_va, grid)
        c_tr = torch.tensor([classes.index(r[2]) for r in rows_tr])
        c_va = torch.tensor([classes.index(r[2]) for r in rows_va])
        majority = Counter(c_tr.tolist()).most_common(1)[0][0]
        res = {"n_train": len(c_tr), "n_val": len(c_va), "classes": len(classes),
               "majority_val_acc": 100 * (c_va == majority).float().mean().item()}
        for name, sl in subsets.items():
            cols = torch.arange(C)[sl]
            idx = (cols[:, None] * 4 + torch.arange(4)).flatten()  # roi_align flattens (C, 2, 2)
            res[name] = probe_linear(f_tr[:, idx], c_tr, f_va[:, idx], c_va, len(classes), args.epochs, cfg.seed)
        result[probe] = res

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for probe in ("count", "count_every_image", "shirt_colour", "shirt_colour_marks", "posture", *TEMPORAL_STATES,
                  *(f"{name}_person" for name in TEMPORAL_STATES)):
        if probe not in result:
            continue
        r = result[probe]
        print(f"{probe}: {r['n_train']} train / {r['n_val']} {args.held_out}, majority {r['majority_val_acc']:.1f} %")
        for name in subsets:
            extra = f", within one {r[name]['val_within_one']:.1f} %" if "val_within_one" in r[name] else ""
            print(f"  {name:7s} {args.held_out} {r[name]['val_acc']:.1f} % (train {r[name]['train_acc']:.1f} %){extra}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
