"""Train and score the entity reasoner on per-image entity records.

    fit_entity_reasoner(cfg) -> result dict (figures on val and test under the full protocol)

The entity ceiling (``scripts/probe_ceiling.py``) feeds the generator's ground-truth entity
records of every split; the same loop trains on predicted records once perception writes them.

Losses: cross-entropy over the options; binary cross-entropy of the pointer against the
evidence spans' entities (every task has them, so the pointer is trained everywhere); binary
cross-entropy of the association logits against "same renderer id" over every pair of real
entities of the same kind; on the questions that count a set of people (``SET_COUNT_TASKS``), a
smooth L1 loss of the soft distinct count against the answer's number. The best epoch is chosen on val accuracy at ``+0``, a figure that
cannot be raised by answering without a necessary view.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from bench.format import load_benchmark
from bench.protocol import ProtocolConfig, plan_queries
from inputs.entity_batch import (WordVocab, build_entity_item, build_text_item, collate_entities,
                                 load_entity_labels, load_predicted_records, with_true_ids)
from model.entity_reasoner import EntityReasoner, EntityReasonerConfig

SETTINGS = ["+0", "+1", "+2", "+3", "-1"]
# tasks whose answer is the number of distinct pointed people: the distinct count's target
SET_COUNT_TASKS = ("dedup_count", "count_in_view", "action_count")


@dataclass
class EntityFitConfig:
    bench_dir: str = "data/synth-default"
    seed: int = 0
    epochs: int = 16                 # the entity ceiling of 2026-12-06 (ad889c0): best val epoch 10
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_epochs: int = 1
    pointer_weight: float = 1.0
    assoc_weight: float = 1.0
    count_weight: float = 0.5
    extra_view_prob: float = 0.5     # train: a view set gets random extra views this often
    threads: int = 2
    model: EntityReasonerConfig = field(default_factory=EntityReasonerConfig)
    limit: int | None = None         # tests: at most this many samples per split
    records: str | None = None       # folder of predicted records (<split>.jsonl.gz); None: the ground truth


class EntitySplit:
    """A benchmark split with its entity records, turned into items per view set."""

    def __init__(self, bench_dir: Path, split: str, vocab: WordVocab | None, limit: int | None = None,
                 records: str | Path | None = None):
        self.bench = load_benchmark(bench_dir / split, check_images=False)
        self.samples = self.bench.samples[:limit] if limit else self.bench.samples
        self.vocab = vocab
        self.predicted = records is not None
        if records is None:  # the entity ceiling: the truth of every split
            self.labels = load_entity_labels(bench_dir, split, allow_eval_splits=True)
        else:
            pred = load_predicted_records(Path(records) / f"{split}.jsonl.gz")
            if split == "train":  # the losses' targets: the true entity each detection matches
                pred = with_true_ids(pred, load_entity_labels(bench_dir, "train"))
            self.labels = {s.scene: pred for s in self.samples}

    def item(self, sample, view_ids) -> dict:
        images = self.labels.get(sample.scene)
        if images is None:
            raise KeyError(f"sample {sample.id}: no entity labels for scene {sample.scene!r}")
        count = float(sample.options[sample.answer_index]) if sample.task in SET_COUNT_TASKS else -1.0
        return {**build_entity_item(sample, view_ids, images, self.vocab), **build_text_item(sample, self.vocab),
                "count_target": count}


def collate(items: list[dict]) -> dict[str, torch.Tensor]:
    batch = collate_entities(items)
    batch["count_target"] = torch.tensor([it["count_target"] for it in items])
    return batch


def _train_views(sample, rng: np.random.Generator, cfg: EntityFitConfig, protocol: ProtocolConfig) -> list[str]:
    views = list(sample.gt_views)
    k_max = min(protocol.max_extra.get(sample.subset or "", 0), len(sample.extra_views))
    if k_max and rng.random() < cfg.extra_view_prob:
        views += list(sample.extra_views[:int(rng.integers(1, k_max + 1))])
    return [views[i] for i in rng.permutation(len(views))]


def losses(out: dict, batch: dict, cfg: EntityFitConfig) -> dict[str, torch.Tensor]:
    answer = F.cross_entropy(out["option_logits"], batch["answer"])
    mask = batch["entity_mask"]
    pointer = F.binary_cross_entropy_with_logits(out["pointer_logits"][mask], batch["pointer"][mask])
    ids, kind = batch["entity_id"], batch["kind"]
    known = mask & (ids >= 0)  # a detection that matches no true entity (id -1) has no association target
    pair = known.unsqueeze(-1) & known.unsqueeze(-2) & (kind.unsqueeze(-1) == kind.unsqueeze(-2))
    pair &= ~torch.eye(mask.shape[1], dtype=torch.bool, device=mask.device)
    same = (ids.unsqueeze(-1) == ids.unsqueeze(-2)).float()
    assoc = F.binary_cross_entropy_with_logits(out["assoc_logits"][pair], same[pair]) if pair.any() else answer * 0
    target = batch.get("count_target", torch.full_like(out["distinct_count"], -1.0))
    counted = target >= 0
    count = (F.smooth_l1_loss(out["distinct_count"][counted], target[counted], beta=0.5)
             if counted.any() else answer * 0)
    total = answer + cfg.pointer_weight * pointer + cfg.assoc_weight * assoc + cfg.count_weight * count
    return {"loss": total, "answer": answer, "pointer": pointer, "assoc": assoc, "count": count}


@torch.no_grad()
def score_split(model: EntityReasoner, data: EntitySplit, settings: list[str], seed: int, batch_size: int,
                oracle_pointer: bool = False, progress: bool = False) -> tuple[list[dict], dict]:
    """Prediction records (the evaluator's format) of every query, and diagnostics at ``+0``:
    pointer precision / recall at 0.5, association accuracy over pairs of sightings in different
    images (persons): precision and recall of "same person" at logit 0."""
    model.eval()
    protocol = ProtocolConfig()
    queries = [(s, q) for s in data.samples for q in plan_queries(s, settings, protocol, seed)]
    records, diag = [], {"ptr_tp": 0.0, "ptr_fp": 0.0, "ptr_fn": 0.0, "as_tp": 0.0, "as_fp": 0.0, "as_fn": 0.0,
                     "count_n": 0.0, "count_exact": 0.0}
    for i in tqdm(range(0, len(queries), batch_size), disable=not progress, desc="score", unit="batch"):
        chunk = queries[i:i + batch_size]
        batch = collate([data.item(s, list(q.view_ids)) for s, q in chunk])
        if oracle_pointer:
            batch["pointer_override"] = batch["pointer"]
        out = model(batch)
        pred = out["option_logits"].argmax(-1)
        mask = batch["entity_mask"]
        for b, (s, q) in enumerate(chunk):
            letter = "ABCDE"[int(pred[b])]
            records.append({"sample_id": s.id, "setting": q.setting, "variant": q.variant, "cluster": s.cluster,
                            "subset": s.subset or "no_subset", "task": s.task, "axis": s.axis,
                            "granularity": s.granularity, "n_options": len(s.options), "primary": q.setting == "+0",
                            "letter": letter, "answer": s.answer, "correct": letter == s.answer,
                            "distractor": s.distractors.get(letter) if letter != s.answer else None,
                            "parse_method": "scores"})
            if q.setting != "+0":
                continue
            if batch["count_target"][b] >= 0:
                diag["count_n"] += 1
                diag["count_exact"] += float(round(float(out["distinct_count"][b])) == float(batch["count_target"][b]))
            m = mask[b]
            hit = torch.sigmoid(out["pointer_logits"][b][m]) > 0.5
            tgt = batch["pointer"][b][m] > 0.5
            diag["ptr_tp"] += float((hit & tgt).sum())
            diag["ptr_fp"] += float((hit & ~tgt).sum())
            diag["ptr_fn"] += float((~hit & tgt).sum())
            person = (batch["kind"][b][m] == 0)
            img = batch["view"][b][m] * 100 + batch["frame"][b][m]
            ids = batch["entity_id"][b][m]
            person = person & (ids >= 0)  # predicted records outside train carry no true identity
            pair = person.unsqueeze(-1) & person.unsqueeze(-2) & (img.unsqueeze(-1) != img.unsqueeze(-2))
            same = ids.unsqueeze(-1) == ids.unsqueeze(-2)
            said = out["assoc_logits"][b][m][:, m] > 0
            diag["as_tp"] += float((said & same & pair).sum())
            diag["as_fp"] += float((said & ~same & pair).sum())
            diag["as_fn"] += float((~said & same & pair).sum())
    tp, atp = diag["ptr_tp"], diag["as_tp"]
    figures = {"pointer_precision": 100 * tp / max(tp + diag["ptr_fp"], 1),
               "pointer_recall": 100 * tp / max(tp + diag["ptr_fn"], 1),
               "association_precision": 100 * atp / max(atp + diag["as_fp"], 1),
               "association_recall": 100 * atp / max(atp + diag["as_fn"], 1),
               "count_exact": 100 * diag["count_exact"] / max(diag["count_n"], 1)}
    return records, figures


def plus0_accuracy(records: list[dict]) -> float:
    rows = [r["correct"] for r in records if r["setting"] == "+0"]
    return 100.0 * float(np.mean(rows)) if rows else 0.0


def fit_entity_reasoner(cfg: EntityFitConfig, out_dir: str | Path | None = None, progress: bool = True) -> dict:
    """Train on train, choose the epoch on val ``+0``, score val and test under the protocol."""
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    root = Path(cfg.bench_dir)
    train = EntitySplit(root, "train", None, cfg.limit, cfg.records)
    vocab = WordVocab.build([s.question for s in train.samples] + [o for s in train.samples for o in s.options])
    train.vocab = vocab
    val, test = (EntitySplit(root, s, vocab, cfg.limit, cfg.records) for s in ("val", "test"))
    cfg.model.vocab_size = len(vocab)
    model = EntityReasoner(cfg.model, vocab.class_words())
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps_per_epoch = math.ceil(len(train.samples) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    warm = steps_per_epoch * cfg.warmup_epochs
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(warm, 1)) * 0.5 * (1 + math.cos(math.pi * min(s / max(total, 1), 1.0))))
    protocol = ProtocolConfig()
    best, best_state, history = -1.0, None, []
    t0 = time.time()
    for epoch in range(cfg.epochs):
        model.train()
        order = rng.permutation(len(train.samples))
        sums: dict[str, float] = {}
        bar = tqdm(range(0, len(order), cfg.batch_size), disable=not progress, desc=f"epoch {epoch}", unit="batch")
        for i in bar:
            items = []
            for j in order[i:i + cfg.batch_size]:
                s = train.samples[int(j)]
                items.append(train.item(s, _train_views(s, rng, cfg, protocol)))
            batch = collate(items)
            out = model(batch)
            terms = losses(out, batch, cfg)
            opt.zero_grad()
            terms["loss"].backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            for k, v in terms.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach())
            bar.set_postfix(loss=f"{sums['loss'] / (i // cfg.batch_size + 1):.3f}")
        val_records, val_diag = score_split(model, val, ["+0"], cfg.seed, 64)
        acc = plus0_accuracy(val_records)
        row = {"epoch": epoch, **{k: v / steps_per_epoch for k, v in sums.items()}, "val_acc": acc, **val_diag,
               "seconds": round(time.time() - t0, 1)}
        history.append(row)
        if progress:
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
        if acc > best:
            best, best_state = acc, {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    result = {"history": history, "best_val_acc": best, "fit_seconds": round(time.time() - t0, 1),
              "vocab_size": len(vocab)}
    for name, data in (("val", val), ("test", test)):
        records, diag = score_split(model, data, SETTINGS, cfg.seed, 64, progress=progress)
        if not data.predicted:  # the evidence names true entities: no pointer oracle on predicted ones
            oracle, _ = score_split(model, data, ["+0"], cfg.seed, 64, oracle_pointer=True)
            diag["answer_acc_oracle_pointer"] = plus0_accuracy(oracle)
        result[name] = {"records": records, "diagnostics": diag}
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        torch.save({"state_dict": model.state_dict(), "vocab": vocab.itos, "config": dataclasses.asdict(cfg.model)},
                   Path(out_dir) / "entity_reasoner.pt")
    return result
