"""Forward + backward time per question of the entity reasoner, entity attention per time step
against the old formulation (a dense (B, H, E, E) bias over every entity of a clip).

    python -m scripts.bench_reasoner [--out runs/bench_reasoner.json] [--batch 32] [--repeats 7]
                                     [--threads 1] [--baseline-rev REV]

The batches are random but valid and shaped like the benchmark's: half spatial samples (4-6
views x 1 frame x 2-10 entities), half temporal (4 views x 8 frames x 3-8 entities each), real
cameras looking at the entities' floor points, so the floor geometry is known. Each setting is
timed in one process, on one batch, interleaved (old, new, old, new, ...): the median over the
repeats, in ms per question, in train mode (dropout on), the entity fit's losses; then the
eval-mode forward alone (also with the nn.TransformerEncoder fast path off, for comparison).

``old`` is the current model with its entity attention replaced by the old dense formulation
(``dense_entity_attention``, copied here); ``--baseline-rev`` also times the whole model file
of that git revision (e.g. the commit before entity attention went per time step) with the same
weights, and checks that its eval-mode outputs equal the current ones.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import platform
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from inputs.entity_batch import COLOUR_NAMES, CONTACT_WIDTH, FIELDS, OBJECT_KINDS, WordVocab, collate_entities
from model.entity_reasoner import EntityReasoner, EntityReasonerConfig

PERSON_FIELDS = ("shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "airborne", "frac")
OBJECT_FIELDS = ("object_kind", "object_colour", "frac")
IMAGE_HW = (224.0, 224.0)


def bench_vocab() -> WordVocab:
    """A vocabulary with the benchmark's kinds of text: object paths, shirts, counts."""
    objects = [f"{c} {k}" for c in COLOUR_NAMES for k in OBJECT_KINDS]
    texts = [f"Where does the person in the {c} shirt walk?" for c in COLOUR_NAMES]
    texts += [f"from the {a} to the {b}" for a, b in zip(objects, objects[1:])]
    texts += ["How many people can be seen?", "What does the person marked 1 hold?", "none of the above"]
    return WordVocab.build(texts)


def look_at(position: np.ndarray, target: np.ndarray, focal: float = 180.0):
    """K, R, t (x_cam = R x_world + t, OpenCV axes) of a camera at ``position`` looking at ``target``."""
    z = target - position
    z = z / np.linalg.norm(z)
    x = np.cross(z, np.array([0.0, 0.0, 1.0]))
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    R = np.stack([x, y, z])
    K = np.array([[focal, 0.0, IMAGE_HW[1] / 2], [0.0, focal, IMAGE_HW[0] / 2], [0.0, 0.0, 1.0]])
    return K, R, -R @ position


def project(K: np.ndarray, R: np.ndarray, t: np.ndarray, point) -> np.ndarray:
    p = K @ (R @ np.asarray(point, dtype=float) + t)
    return p[:2] / p[2]


def entity_box(K, R, t, xy, height: float) -> list[float]:
    """The pixel box of an upright entity standing at floor point ``xy``: its bottom centre is the feet."""
    feet = project(K, R, t, [xy[0], xy[1], 0.0])
    head = project(K, R, t, [xy[0], xy[1], height])
    half = 0.2 * max(feet[1] - head[1], 1.0)
    return [feet[0] - half, head[1], feet[0] + half, feet[1]]


def scene_cameras(rng: np.random.Generator, n_views: int):
    out = []
    for v in range(n_views):
        a = 2 * math.pi * v / n_views + rng.uniform(-0.3, 0.3)
        pos = np.array([5.0 * math.cos(a), 5.0 * math.sin(a), rng.uniform(1.5, 3.0)])
        out.append(look_at(pos, np.array([rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), 0.5])))
    return out


def make_item(rng: np.random.Generator, vocab: WordVocab, n_views: int, n_frames: int,
              per_view: tuple[int, int], n_options: int = 4) -> dict:
    """One random but valid item (``build_entity_item`` + ``build_text_item`` format): a scene of
    persons (walking, when there are several frames) and objects, each view showing some of them."""
    n_scene = per_view[1] + 2
    kinds = ["person" if i < n_scene // 2 else "object" for i in range(n_scene)]
    start = rng.uniform(-2.0, 2.0, (n_scene, 2))
    end = np.where(np.array(kinds)[:, None] == "person", rng.uniform(-2.0, 2.0, (n_scene, 2)), start)
    fields_of = []
    for k in kinds:
        names = PERSON_FIELDS if k == "person" else OBJECT_FIELDS
        fields_of.append([int(rng.integers(0, FIELDS[f])) + 1 if f in names else 0 for f in FIELDS])
    cams = scene_cameras(rng, n_views)
    rows: dict[str, list] = {k: [] for k in ("fields", "contact", "kind", "box", "image_hw", "view", "frame", "time",
                                             "mark", "image_mark", "mark_role", "entity_id", "pointer")}
    pointed = int(rng.integers(0, n_scene // 2))
    for v, (K, R, t) in enumerate(cams):
        for f in range(n_frames):
            s = f / max(n_frames - 1, 1)
            shown = rng.choice(n_scene, int(rng.integers(per_view[0], per_view[1] + 1)), replace=False)
            for i in sorted(shown.tolist()):
                xy = (1 - s) * start[i] + s * end[i]
                person = kinds[i] == "person"
                rows["fields"].append(fields_of[i])
                contact = np.zeros(CONTACT_WIDTH)
                if person:
                    contact[rng.choice(CONTACT_WIDTH, 2, replace=False)] = 1.0
                rows["contact"].append(contact.tolist())
                rows["kind"].append(0 if person else 1)
                rows["box"].append(entity_box(K, R, t, xy, 1.7 if person else 0.5))
                rows["image_hw"].append(IMAGE_HW)
                rows["view"].append(v)
                rows["frame"].append(f)
                rows["time"].append(0.5 * f)
                marked = person and rng.random() < 0.2
                rows["mark"].append(vocab.stoi[str(int(rng.integers(1, 6)))] if marked else 0)
                rows["image_mark"].append(0)
                rows["mark_role"].append(int(rng.integers(1, 4)) if marked else 0)
                rows["entity_id"].append(i)
                rows["pointer"].append(float(i == pointed))
    item = {k: torch.tensor(v, dtype=torch.float32 if k in ("contact", "box", "image_hw", "time", "pointer")
                            else torch.long) for k, v in rows.items()}
    item["camera_K"] = torch.tensor(np.stack([c[0] for c in cams]), dtype=torch.float32)
    item["camera_R"] = torch.tensor(np.stack([c[1] for c in cams]), dtype=torch.float32)
    item["camera_t"] = torch.tensor(np.stack([c[2] for c in cams]), dtype=torch.float32)
    item["has_camera"] = torch.ones(n_views, dtype=torch.bool)
    n_words = len(vocab)
    item["question"] = torch.tensor([2] + rng.integers(3, n_words, int(rng.integers(8, 15))).tolist())
    item["options"] = [torch.tensor([2] + rng.integers(3, n_words, int(rng.integers(2, 9))).tolist())
                       for _ in range(n_options)]
    item["answer"] = int(rng.integers(0, n_options))
    return item


def random_batch(vocab: WordVocab, batch_size: int = 32, seed: int = 0, temporal_share: float = 0.5) -> dict:
    """A batch shaped like the benchmark's: spatial samples (4-6 views x 1 frame x 2-10 entities per
    view) and temporal ones (4 views x 8 frames x 3-8 entities per image), mixed."""
    rng = np.random.default_rng(seed)
    n_temporal = round(batch_size * temporal_share)
    items = []
    for i in range(batch_size):
        if i % 2 == 1 and n_temporal > 0 or batch_size - i <= n_temporal:
            items.append(make_item(rng, vocab, 4, 8, (3, 8), int(rng.integers(4, 6))))
            n_temporal -= 1
        else:
            items.append(make_item(rng, vocab, int(rng.integers(4, 7)), 1, (2, 10), int(rng.integers(4, 6))))
    return collate_entities(items)


# -- the old formulation: one dense (B, H, E, E) bias over every entity of a clip ----------------------------

def dense_attention_bias(model, view, frame, mask, geo, known) -> torch.Tensor:
    """The old ``EntityReasoner.attention_bias``: -inf across time steps and to padding."""
    same_t = frame.unsqueeze(-1) == frame.unsqueeze(-2)
    allowed = same_t & mask.unsqueeze(-2)
    if not model.cfg.entity_attention:
        allowed = allowed & (view.unsqueeze(-1) == view.unsqueeze(-2))
    allowed = allowed | torch.eye(mask.shape[1], dtype=torch.bool, device=mask.device)
    dist = torch.cdist(geo[..., :2], geo[..., :2])
    both = known.unsqueeze(-1) & known.unsqueeze(-2)
    bias = -F.softplus(model.floor_scale).view(1, -1, 1, 1) * (dist * both).unsqueeze(1)
    same_img = (view.unsqueeze(-1) == view.unsqueeze(-2)) & same_t
    bias = bias + model.same_image.view(1, -1, 1, 1) * same_img.unsqueeze(1)
    return bias.masked_fill(~allowed.unsqueeze(1), float("-inf"))


def dense_block(blk, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The old ``BiasedBlock.forward`` on (B, E, d) tokens with a (B, H, E, E) bias."""
    b, n, d = x.shape
    q, k, v = blk.qkv(blk.norm1(x)).view(b, n, 3, blk.heads, d // blk.heads).permute(2, 0, 3, 1, 4)
    att = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    x = x + blk.drop(blk.out(att.transpose(1, 2).reshape(b, n, d)))
    return x + blk.drop(blk.mlp(blk.norm2(x)))


def dense_entity_attention(self, x, view, frame, mask, geo, known) -> torch.Tensor:
    """Drop-in for ``EntityReasoner.entity_attention``: the old dense computation over all pairs."""
    bias = dense_attention_bias(self, view, frame, mask, geo, known)
    for blk in self.entity_blocks:
        x = dense_block(blk, x, bias)
    return x


def with_dense_attention(model: EntityReasoner) -> EntityReasoner:
    """``model`` (the same module, weights shared) running the old dense entity attention."""
    model.entity_attention = types.MethodType(dense_entity_attention, model)
    return model


def model_at_revision(rev: str, cfg: EntityReasonerConfig, class_words: dict, state: dict) -> torch.nn.Module:
    """The EntityReasoner of ``model/entity_reasoner.py`` at git revision ``rev``, with ``state``'s weights."""
    src = subprocess.run(["git", "show", f"{rev}:model/entity_reasoner.py"], check=True, capture_output=True,
                         text=True).stdout
    path = Path(tempfile.mkdtemp()) / "entity_reasoner_at_rev.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("entity_reasoner_at_rev", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    known = set(mod.EntityReasonerConfig.__dataclass_fields__)
    old_cfg = mod.EntityReasonerConfig(**{k: v for k, v in vars(cfg).items() if k in known})
    model = mod.EntityReasoner(old_cfg, class_words)
    model.load_state_dict(state)
    return model


# -- timing ---------------------------------------------------------------------------------------------------

def fit_loss():
    """The training loss, (out, batch) -> scalar: ``training.losses.EntityCriterion`` with the default weights."""
    from training.config import LossConfig
    from training.losses import EntityCriterion
    criterion = EntityCriterion(LossConfig())
    return lambda out, batch: criterion(out, batch)["loss"]


def train_step(model: torch.nn.Module, batch: dict, loss=None) -> None:
    model.zero_grad(set_to_none=True)
    (loss or fit_loss())(model(batch), batch).backward()


def time_settings(models: dict[str, torch.nn.Module], batch: dict, repeats: int) -> dict[str, float]:
    """Median seconds of one forward + backward per model, interleaved over ``repeats`` rounds."""
    loss = fit_loss()
    for m in models.values():
        m.train()
        train_step(m, batch, loss)  # warm-up
    times: dict[str, list[float]] = {k: [] for k in models}
    for _ in range(repeats):
        for name, m in models.items():
            start = time.perf_counter()
            train_step(m, batch, loss)
            times[name].append(time.perf_counter() - start)
    return {k: float(np.median(v)) for k, v in times.items()}


def time_eval(models: dict[str, torch.nn.Module], batch: dict, repeats: int) -> dict[str, float]:
    """Median seconds of one eval-mode forward per model without gradients, interleaved; the new model
    also with the nn.TransformerEncoder fast path off (``torch.backends.mha``; restored afterwards)."""
    runs = dict(models)
    runs["new_per_time_step_no_mha_fastpath"] = models["new_per_time_step"]
    times: dict[str, list[float]] = {k: [] for k in runs}
    was = torch.backends.mha.get_fastpath_enabled()
    try:
        with torch.no_grad():
            for m in models.values():
                m.eval()(batch)
            for _ in range(repeats):
                for name, m in runs.items():
                    torch.backends.mha.set_fastpath_enabled(not name.endswith("no_mha_fastpath"))
                    start = time.perf_counter()
                    m(batch)
                    times[name].append(time.perf_counter() - start)
    finally:
        torch.backends.mha.set_fastpath_enabled(was)
    return {k: float(np.median(v)) for k, v in times.items()}


def sdpa_masks(g: int, s: int, heads: int, dh: int, repeats: int) -> dict[str, float]:
    """ms of one SDPA forward + backward on (g, heads, s, dh) with padding given as -inf in the float
    bias (what the model does) or as a boolean mask (no float bias: what it would cost without it)."""
    q, k, v = (torch.randn(g, heads, s, dh, requires_grad=True) for _ in range(3))
    real = torch.arange(s) < torch.randint(1, s + 1, (g, 1))
    allowed = (real.unsqueeze(1) | torch.eye(s, dtype=torch.bool)).unsqueeze(1)
    bias = torch.randn(g, heads, s, s).masked_fill(~allowed, float("-inf"))
    out = {}
    for name, mask in (("float_bias_with_inf", bias), ("bool", allowed), ("none", None)):
        def step(mask=mask):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
        step()
        ts = []
        for _ in range(repeats):
            start = time.perf_counter()
            step()
            ts.append(time.perf_counter() - start)
        out[name] = 1000 * float(np.median(ts))
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/bench_reasoner.json")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline-rev", default=None, help="also time model/entity_reasoner.py of this git revision")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    vocab = bench_vocab()
    cfg = EntityReasonerConfig(vocab_size=len(vocab))
    batch = random_batch(vocab, args.batch, args.seed)
    new = EntityReasoner(cfg, vocab.class_words())
    old = with_dense_attention(EntityReasoner(cfg, vocab.class_words()))
    old.load_state_dict(new.state_dict())
    models = {"old_dense": old, "new_per_time_step": new}
    diffs = {}
    if args.baseline_rev:
        models[f"rev_{args.baseline_rev}"] = model_at_revision(args.baseline_rev, cfg, vocab.class_words(),
                                                               new.state_dict())
    with torch.no_grad():
        want = new.eval()(batch)
        mask = batch["entity_mask"]
        pair = mask.unsqueeze(-1) & mask.unsqueeze(-2)
        for name, m in models.items():
            got = m.eval()(batch)
            diffs[name] = {"option_logits": float((got["option_logits"] - want["option_logits"]).abs().max()),
                           "assoc_logits": float((got["assoc_logits"] - want["assoc_logits"])[pair].abs().max()),
                           "entity_tokens": float((got["entity_tokens"] - want["entity_tokens"])[mask].abs().max())}
    secs = time_settings(models, batch, args.repeats)
    eval_secs = time_eval(models, batch, args.repeats)
    frames = batch["frame"].clamp_min(0)
    groups = torch.unique(((torch.arange(args.batch).unsqueeze(1) * 16 + frames)[mask]), return_counts=True)[1]
    result = {
        "ms_per_question": {k: 1000 * v / args.batch for k, v in secs.items()},
        "speedup_old_over_new": secs["old_dense"] / secs["new_per_time_step"],
        "eval_forward_ms_per_question": {k: 1000 * v / args.batch for k, v in eval_secs.items()},
        "max_abs_diff_to_new_eval": diffs,
        "batch": args.batch, "entities_padded": int(mask.shape[1]), "entities_real": int(mask.sum()),
        "time_step_groups": int(groups.numel()), "largest_group": int(groups.max()),
        "sdpa_ms_padding_as": sdpa_masks(int(groups.numel()), int(groups.max()), cfg.heads, cfg.width // cfg.heads,
                                         args.repeats),
        "threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
        "repeats": args.repeats, "width": cfg.width, "heads": cfg.heads, "entity_layers": cfg.entity_layers,
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
