"""Random batches that follow the CrossViewModel contract (tests, latency benchmarks).

Cameras are placed on a circle looking at the scene centre from 2.5 m height, so rays and
floor points are realistic; marks are random boxes inside the image.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import torch

from model.config import MAX_VIEW_COUNT, ModelConfig


def look_at_camera(eye: torch.Tensor, target: torch.Tensor, focal: float, width: int, height: int):
    """OpenCV camera at `eye` looking at `target`, world z up -> (K, R, t)."""
    forward = target - eye
    forward = forward / forward.norm()
    right = torch.linalg.cross(forward, torch.tensor([0.0, 0.0, 1.0]))
    right = right / right.norm()
    down = torch.linalg.cross(forward, right)
    R = torch.stack([right, down, forward])  # rows: camera x, y, z axes in world
    t = -R @ eye
    K = torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])
    return K, R, t


def random_batch(cfg: ModelConfig, views: Sequence[int], frames: Sequence[int],
                 options: Sequence[int], cameras: Optional[Sequence[bool]] = None,
                 marks: int = 3, grid: int = 4, prompt_len: int = 12, option_len: int = 3,
                 image_size: int = 32, seed: int = 0) -> Dict[str, torch.Tensor]:
    """A padded batch of len(views) samples.

    Args:
        cfg: gives feature widths and vocabulary size.
        views, frames, options: per-sample number of views, frames per view, options.
        cameras: per-sample has-camera flag (default all True).
        marks: max marks per frame (each real frame gets 1..marks).
        grid: patch grid side (P = grid**2); image_size: original image side in pixels.
    """
    gen = torch.Generator().manual_seed(seed)
    b, v_max, t_max, o_max = len(views), max(views), max(frames), max(options)
    cameras = [True] * b if cameras is None else list(cameras)
    p = grid * grid
    batch = {
        "patch_tokens": torch.randn(b, v_max, t_max, p, cfg.patch_dim, generator=gen),
        "pooled": torch.randn(b, v_max, t_max, cfg.pooled_dim, generator=gen),
        "frame_mask": torch.zeros(b, v_max, t_max, dtype=torch.bool),
        "view_mask": torch.zeros(b, v_max, dtype=torch.bool),
        "frame_time": torch.arange(t_max).float().mul(0.5).expand(b, v_max, t_max).clone(),
        "camera_K": torch.eye(3).expand(b, v_max, 3, 3).clone(),
        "camera_R": torch.eye(3).expand(b, v_max, 3, 3).clone(),
        "camera_t": torch.zeros(b, v_max, 3),
        "image_hw": torch.full((b, v_max, 2), float(image_size)),
        "has_camera": torch.zeros(b, v_max, dtype=torch.bool),
        "mark_boxes": torch.zeros(b, v_max, t_max, marks, 4),
        "mark_label": torch.zeros(b, v_max, t_max, marks, dtype=torch.long),
        "mark_role": torch.zeros(b, v_max, t_max, marks, dtype=torch.long),
        "mark_mask": torch.zeros(b, v_max, t_max, marks, dtype=torch.bool),
        "prompt_ids": torch.zeros(b, prompt_len, dtype=torch.long),
        "prompt_mask": torch.zeros(b, prompt_len, dtype=torch.bool),
        "option_ids": torch.zeros(b, o_max, option_len, dtype=torch.long),
        "option_mask": torch.zeros(b, o_max, option_len, dtype=torch.bool),
        "option_valid": torch.zeros(b, o_max, dtype=torch.bool),
        # The person track's recorded states (inputs/track.py): random ids on real frames.
        "track_target": torch.full((b, v_max, t_max), -100, dtype=torch.long),
        # The generator's per-frame people counts (inputs/view_counts.py): random on real frames.
        "count_target": torch.full((b, v_max, t_max), -100, dtype=torch.long),
        # Where the asked person is (inputs/track.py, track_boxes): a random box or none.
        "track_box": torch.zeros(b, v_max, t_max, 4),
        "track_box_flag": torch.full((b, v_max, t_max), -100, dtype=torch.long),
    }
    vocab = cfg.lm.vocab_size
    for i, (nv, nt, no) in enumerate(zip(views, frames, options)):
        batch["view_mask"][i, :nv] = True
        batch["frame_mask"][i, :nv, :nt] = True
        own = torch.Generator().manual_seed(i)  # not ``gen``: the other fields stay as they were
        batch["track_target"][i, :nv, :nt] = torch.randint(0, cfg.fusion.track_states, (nv, nt), generator=own)
        batch["count_target"][i, :nv, :nt] = torch.randint(0, MAX_VIEW_COUNT + 1, (nv, nt), generator=own)
        corner = torch.rand(nv, nt, 2, generator=own) * 0.7
        batch["track_box"][i, :nv, :nt] = torch.cat([corner, corner + 0.3], -1)
        batch["track_box_flag"][i, :nv, :nt] = torch.randint(0, 2, (nv, nt), generator=own)
        labels = torch.randperm(cfg.entity.max_label, generator=gen) + 1
        used = 0
        for v in range(nv):
            angle = 2 * math.pi * v / nv + 0.3 * i
            eye = torch.tensor([4.0 * math.cos(angle), 4.0 * math.sin(angle), 2.5])
            K, R, t = look_at_camera(eye, torch.zeros(3), image_size, image_size, image_size)
            batch["camera_K"][i, v], batch["camera_R"][i, v], batch["camera_t"][i, v] = K, R, t
            batch["has_camera"][i, v] = cameras[i]
            for f in range(nt):
                count = int(torch.randint(1, marks + 1, (1,), generator=gen))
                for m in range(count):
                    xy = torch.rand(2, generator=gen) * image_size * 0.7
                    wh = (torch.rand(2, generator=gen) * 0.25 + 0.05) * image_size
                    batch["mark_boxes"][i, v, f, m] = torch.cat([xy, xy + wh])
                    batch["mark_label"][i, v, f, m] = labels[used % len(labels)]
                    batch["mark_role"][i, v, f, m] = int(torch.randint(0, 4, (1,), generator=gen))
                    batch["mark_mask"][i, v, f, m] = True
                    used += 1
        length = int(torch.randint(prompt_len // 2, prompt_len + 1, (1,), generator=gen))
        batch["prompt_ids"][i, :length] = torch.randint(1, vocab, (length,), generator=gen)
        batch["prompt_mask"][i, :length] = True
        batch["option_valid"][i, :no] = True
        for o in range(no):
            length = int(torch.randint(1, option_len + 1, (1,), generator=gen))
            batch["option_ids"][i, o, :length] = torch.randint(1, vocab, (length,), generator=gen)
            batch["option_mask"][i, o, :length] = True
    return batch

def with_answer_labels(batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """``batch`` plus the labels the criterion reads (training/losses.py): answer A on every
    sample and no evidence targets, so a loss test sets only the target it is about."""
    b = batch["frame_mask"].shape[0]
    return dict(batch, answer=torch.zeros(b, dtype=torch.long), answer_valid=torch.ones(b, dtype=torch.bool),
                evidence_valid=torch.zeros(b, dtype=torch.bool),
                evidence_target=torch.zeros(batch["frame_mask"].shape),
                entity_evidence_target=torch.zeros(batch["mark_mask"].shape))


def permute_views(batch: Dict[str, torch.Tensor], order: List[int]) -> Dict[str, torch.Tensor]:
    """Reorder the view axis (dim 1) of every per-view tensor."""
    per_view = {"patch_tokens", "pooled", "frame_mask", "view_mask", "frame_time", "camera_K",
                "camera_R", "camera_t", "image_hw", "has_camera", "mark_boxes", "mark_label",
                "mark_role", "mark_mask"}
    index = torch.tensor(order)
    return {k: (x.index_select(1, index) if k in per_view else x) for k, x in batch.items()}
