"""What has the person track's state head learnt? Per-task state accuracy against the majority class.

    python -m scripts.probe_track checkpoints/<stage or joint run>/best.ckpt [--split val]
        [--settings +0] [--ground-truth] [--out runs/probe_track.json]

``val/track_seen_acc`` (the stage's monitor) is the state accuracy on the (view, frame) pairs
that show the asked person, over every temporal task at once. Alone it does not say whether
the head reads anything: most frames of a counting clip show the person standing, so one class
per task is already right on most frames. This script scores a checkpoint's track
(``CrossViewModel.forward_track``) on a split's temporal questions and prints, per task:

* ``acc``: accuracy on the frames that show the person (the monitor, split by task);
* ``majority``: the same figure for a head that always answers the task's most frequent
  shown state in the *train* split: the floor the head must beat to have read the frames;
* ``state_acc``: the same with "unseen" taken out of the head's choices: can the head read the
  state of a frame that shows the person, whether or not it finds the person there;
* where the misses go: ``pred_unseen`` (the head says the person is not in view: the locator
  missed them) and ``wrong_state`` (a state of the right channel, the wrong one);
* ``unseen_acc``: accuracy on the frames that do not show the person;
* ``located``: on the frames that show the person, how often the locator's most-attended cell
  lies in the person's box (the generator's ``person_boxes``; None for benchmarks without them).

``--unseen-reasons`` rebuilds the split's clips (about 30 s on the default val split) and
says why the records of the counting questions say "unseen": the person not seen, seen with
the shirt hidden (not recognisable), or in view with the asked part (feet, forearm) hidden.

``--ground-truth`` reads the ground-truth grid's cache (scripts/probe_ceiling.py) instead of
the tower's, for a stage trained there. Labels are the generator's per-frame records
(inputs/track.py); nothing is trained here.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import torch

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")

from inputs.track import CHANNEL, IGNORE, TRACK_STATES, UNSEEN, track_targets  # noqa: E402


def majority_states(bench) -> dict[str, int]:
    """Task -> its most frequent shown state (class id) over every view and frame of ``bench``."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for s in bench.samples:
        if s.task not in CHANNEL:
            continue
        ids = [v.view_id for v in s.views]
        n_frames = max((len(v.frames) for v in s.views), default=0)
        target = track_targets(s.task, s.meta, ids, max(n_frames, 1))
        counts[s.task].update(t for t in target.flatten().tolist() if t not in (IGNORE, UNSEEN))
    return {task: c.most_common(1)[0][0] for task, c in counts.items() if c}


def tally_frames(tally: dict, logits: torch.Tensor, target: torch.Tensor, tasks: list[str],
                 majority: dict[str, int], located: torch.Tensor | None = None) -> None:
    """Add one batch to ``tally`` (task -> Counter): (B, V, T, S) state logits and (B, V, T)
    recorded state ids; ``located`` (B, V, T) long: 1 the locator's best cell is in the
    person's box, 0 it is not, -1 no box recorded (None: no box anywhere)."""
    pred = logits.argmax(-1)
    shown = logits[..., UNSEEN + 1:].argmax(-1) + UNSEEN + 1  # the best state other than "unseen"
    if located is None:
        located = torch.full_like(target, -1)
    for row, task in enumerate(tasks):
        c, floor = tally[task], majority.get(task)
        for p, q, t, at in zip(pred[row].flatten().tolist(), shown[row].flatten().tolist(),
                               target[row].flatten().tolist(), located[row].flatten().tolist()):
            if t == IGNORE:
                continue
            if t == UNSEEN:
                c["unseen"] += 1
                c["unseen_ok"] += p == UNSEEN
                continue
            c["seen"] += 1
            c["ok"] += p == t
            c["state_ok"] += q == t
            c["majority_ok"] += t == floor
            c["pred_unseen"] += p != t and p == UNSEEN
            c["wrong_state"] += p != t and p != UNSEEN
            if at >= 0:
                c["boxed"] += 1
                c["located"] += at


def summarise(tally: dict) -> dict:
    """Task -> figures in % of frames (None where a task has no such frame), plus an "all" row."""
    rows = {task: tally[task] for task in sorted(tally)}
    rows["all"] = sum(tally.values(), Counter())

    def pct(a: int, b: int):
        return round(100.0 * a / b, 1) if b else None

    return {task: {"seen": c["seen"], "acc": pct(c["ok"], c["seen"]), "majority": pct(c["majority_ok"], c["seen"]),
                   "state_acc": pct(c["state_ok"], c["seen"]),
                   "pred_unseen": pct(c["pred_unseen"], c["seen"]), "wrong_state": pct(c["wrong_state"], c["seen"]),
                   "unseen": c["unseen"], "unseen_acc": pct(c["unseen_ok"], c["unseen"]),
                   "located": pct(c["located"], c["boxed"])}
            for task, c in rows.items()}


def locator_hits(out: dict, batch: dict) -> torch.Tensor:
    """(B, V, T) long: 1 where the locator's most-attended cell lies in the person's box, 0 where
    it does not, -1 where no box is recorded (the person shows no pixel, or no record)."""
    from training.losses import CrossViewCriterion
    keep, hit = CrossViewCriterion.locate_hits(out, batch)
    return torch.where(keep & (batch["track_box_flag"] == 1), hit.long(), -1)


def score_track(model, dataset, tasks: list[str], majority: dict[str, int], pad_id: int,
                batch_size: int = 16) -> dict:
    """Per-task figures (see the module docstring) of ``model.forward_track`` over ``dataset``.

    Args:
        model: a CrossViewModel with a track; dataset: a ViewSetDataset; tasks: the task of each
            of its items; majority: ``majority_states`` of the train split; pad_id: the
            tokenizer's padding id.
    """
    from inputs.items import collate
    tally: dict[str, Counter] = defaultdict(Counter)
    order = [i for i in range(len(dataset)) if tasks[i] in CHANNEL]
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            batch = collate([dataset[i] for i in idx], table=dataset.table, pad_id=pad_id)
            out = model.forward_track(batch)
            tally_frames(tally, out["track_logits"], batch["track_target"], [tasks[i] for i in idx], majority,
                         locator_hits(out, batch))
    return summarise(tally)


def unseen_reasons(doc: dict, build=None) -> dict:
    """Why the records of a split's counting questions say "unseen", per task: the person not
    seen at all, seen with the shirt hidden (not recognisable), or in view with the asked
    part hidden. ``doc``: the split's benchmark.json; ``build(idx)`` returns a temporal
    scene's per-view, per-frame observations (default: the generator's rebuild)."""
    from bench.synth.tasks_temporal import SIDE_TEXT, counted_part_visible
    if build is None:
        from common.config import from_dict
        from bench.synth.config import SynthConfig
        from bench.synth.generate import build_temporal_scene
        cfg = from_dict(SynthConfig, doc["config"])

        def build(idx):
            return build_temporal_scene(cfg, idx)[2]
    out: dict[str, Counter] = defaultdict(Counter)
    scenes: dict[str, dict] = {}
    for s in doc["samples"]:
        if s["task"] not in ("repetition_count", "limb_repetition_count"):
            continue
        if s["scene"] not in scenes:
            scenes[s["scene"]] = build(int(s["scene"].lstrip("t")))
        obs, pid = scenes[s["scene"]], s["meta"]["facts"]["person"]
        side = next((k for k, word in SIDE_TEXT.items() if f" {word} hand" in s["question"]), "r")
        visible = counted_part_visible(s["task"], side)
        for view, record in s["meta"]["observations"].items():
            for f, o in enumerate(record["obs"]):
                r = obs[view][f]["persons"][pid]
                if o is not None:
                    out[s["task"]]["shown"] += 1
                elif not r["seen"]:
                    out[s["task"]]["not seen"] += 1
                elif "shirt" not in r["attrs"]:
                    out[s["task"]]["shirt hidden"] += 1
                else:
                    out[s["task"]]["part hidden" if not visible(r) else "other"] += 1
    return {task: dict(c) for task, c in sorted(out.items())}


def markdown_table(figures: dict) -> str:
    cols = ["seen", "acc", "majority", "state_acc", "pred_unseen", "wrong_state", "unseen", "unseen_acc", "located"]
    lines = ["| task | " + " | ".join(cols) + " |", "| :--- |" + " ---: |" * len(cols)]
    for task, row in figures.items():
        cells = ["–" if row[c] is None else str(row[c]) for c in cols]
        lines.append(f"| {'**all**' if task == 'all' else task} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ckpt", help="a checkpoint of a model with model.fusion.track on")
    parser.add_argument("--split", default="val", help="split to score (the majority floor comes from train)")
    parser.add_argument("--settings", nargs="+", default=["+0"], help="view settings of the protocol to score")
    parser.add_argument("--ground-truth", action="store_true",
                        help="read the ground-truth grid's cache (a stage trained by scripts/probe_ceiling.py)")
    parser.add_argument("--unseen-reasons", action="store_true",
                        help="also rebuild the split's clips and say why the counting questions' records "
                             "say unseen (person not seen, shirt hidden, asked part hidden)")
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)

    from bench.format import load_benchmark
    from inputs.text import build_tokenizer
    from training.checkpoint import CheckpointError, checkpoint_config, load_module_from_checkpoint, read_checkpoint
    from inputs.items import split_images
    from training.data import ViewSetDataset
    from training.datamodule import _tasks, protocol_view_sets
    from training.run import build_components

    try:
        cfg = checkpoint_config(read_checkpoint(args.ckpt), args.ckpt)
        module = load_module_from_checkpoint(args.ckpt).eval()
    except (CheckpointError, FileNotFoundError) as err:
        raise SystemExit(f"error: {err}")
    if module.model.track is None:
        raise SystemExit(f"error: {args.ckpt}: its model has no track (model.fusion.track is off)")
    if args.ground_truth:
        from scripts.probe_ceiling import GroundTruthCache
        cache, tokenizer = GroundTruthCache(cfg.data.cache_dir), build_tokenizer(cfg.model)
    else:
        cache, tokenizer = build_components(cfg)
    root = Path(cfg.data.bench_dir)
    temporal = sorted(CHANNEL)
    train = load_benchmark(root / "train", check_images=False)
    held = load_benchmark(root / args.split, check_images=False)
    present = [t for t in temporal if any(s.task == t for s in held.samples)]
    if not present:
        raise SystemExit(f"error: {root / args.split}: no temporal questions ({', '.join(temporal)})")
    held = _tasks(held, present)
    table = cache.table(split_images(held), desc=f"encoding {args.split} images")
    sets = protocol_view_sets(held, args.settings, cfg.eval.seed)
    dataset = ViewSetDataset(held, table, tokenizer, view_sets=sets)
    tasks = [held.samples[vs.sample_index].task for vs in sets]
    figures = score_track(module.model, dataset, tasks, majority_states(train), tokenizer.pad_id)
    print(f"{args.ckpt}: the track's state accuracy on {args.split} ({' '.join(args.settings)}), % of frames; "
          f"majority: the task's most frequent train state\n")
    print(markdown_table(figures))
    reasons = None
    if args.unseen_reasons:
        reasons = unseen_reasons(json.loads((root / args.split / "benchmark.json").read_text()))
        print("\nwhy the records say unseen (view-frame records of the counting questions, every view):")
        for task, c in reasons.items():
            print(f"  {task}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"ckpt": str(args.ckpt), "split": args.split, "settings": args.settings,
                                              "states": len(TRACK_STATES), "tasks": figures,
                                              "unseen_reasons": reasons}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
