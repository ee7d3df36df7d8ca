"""A tiny benchmark in this format, written without the generator: real PNGs, 4- and 5-option,
SVS and MVN, with and without cameras. The tests' fixture benchmark, and the input of
scripts/bench_request_pool.py."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from PIL import Image


def look_at(eye, target=(0.0, 0.0, 0.8)):
    """World-to-camera R, t (OpenCV axes) for a camera at ``eye`` looking at ``target``; z is up."""
    eye = np.asarray(eye, float)
    fwd = np.asarray(target, float) - eye
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(fwd, right)
    R = np.stack([right, down, fwd])
    return R.tolist(), (-R @ eye).tolist()


def ring_camera(i: int, n: int, size: int) -> dict:
    angle = 2 * math.pi * i / n
    R, t = look_at((4 * math.cos(angle), 4 * math.sin(angle), 2.0))
    f = size * 1.2
    return {"K": [[f, 0.0, size / 2], [0.0, f, size / 2], [0.0, 0.0, 1.0]], "R": R, "t": t,
            "width": size, "height": size}


def make_tiny_benchmark(root: Path, n_scenes: int = 4, image_size: int = 32, n_views: int = 4,
                        n_frames: int = 1, cameras: bool = True, fmt: str = "json") -> Path:
    """Write a small valid benchmark under ``root`` and return the folder.

    Each scene gets ``n_views`` cameras and four samples: SVS 4-option, MVN 4-option,
    an MVN 5-option with "None of the above", and one with no subset (CVBench style).
    """
    root = Path(root)
    rng = np.random.default_rng(0)
    samples = []
    for s in range(n_scenes):
        scene = f"s{s:03d}"
        views = []
        for v in range(n_views):
            frames = []
            for f in range(n_frames):
                rel = f"images/{scene}/cam{v}_{f:03d}.png"
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                pixels = rng.integers(0, 255, (image_size, image_size, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / rel)
                frames.append({"t": float(f) * 0.5, "image": rel})
            view = {"view_id": f"cam{v}", "frames": frames}
            if cameras and not (s % 2 and v == 0):  # one uncalibrated view in odd scenes
                view["camera"] = ring_camera(v, n_views, image_size)
            views.append(view)
        ids = [v["view_id"] for v in views]
        base = {"scene": scene, "views": views, "axis": "spatial", "granularity": "coarse"}
        samples.append({**base, "id": f"{scene}-svs", "task": "count_in_view", "subset": "SVS",
                        "gt_views": ids[:1], "extra_views": ids[1:4],
                        "question": "How many people are in the view with the red ball?",
                        "options": ["1", "2", "3", "4"], "answer": "ABCD"[s % 4],
                        "distractors": {"ABCD"[(s + 1) % 4]: "naive_sum"},
                        "evidence": [{"view_id": ids[0], "t_start": 0.0, "t_end": 0.0, "entities": [1]}]})
        samples.append({**base, "id": f"{scene}-mvn", "task": "dedup_count", "subset": "MVN",
                        "granularity": "fine", "gt_views": ids[:2], "extra_views": ids[2:4],
                        "question": "How many different people are in the scene?",
                        "options": ["2", "3", "4", "5"], "answer": "ABCD"[(s + 1) % 4],
                        "distractors": {"ABCD"[(s + 2) % 4]: "single_view_count",
                                        "ABCD"[(s + 3) % 4]: "naive_sum"},
                        "marks": [{"view_id": ids[0], "t": 0.0, "entity": 1, "label": "1",
                                   "box": [2.0, 2.0, 10.0, 20.0]}]})
        samples.append({**base, "id": f"{scene}-nota", "task": "identity_match", "subset": "MVN",
                        "gt_views": ids[1:3], "extra_views": [ids[0], ids[3]] if n_views > 3 else [],
                        "question": "The person marked 1 is which marked person in another view?",
                        "options": ["2", "3", "4", "5", "None of the above"], "answer": "ABCDE"[s % 5],
                        "distractors": {"ABCDE"[(s + 1) % 5]: "same_shirt_person"}})
        samples.append({**base, "id": f"{scene}-all", "task": "relation", "axis": "temporal",
                        "gt_views": ids, "question": "Which object is nearest to the person?",
                        "options": ["ball", "box", "pole", "chair", "None of the above"],
                        "answer": "ABCDE"[(s + 2) % 5]})
    root.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with open(root / "benchmark.jsonl", "w") as fh:
            for sample in samples:
                fh.write(json.dumps(sample) + "\n")
    else:
        with open(root / "benchmark.json", "w") as fh:
            json.dump({"name": "tiny", "samples": samples}, fh, indent=1)
    return root
