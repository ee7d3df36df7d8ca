"""CrossViewModel: cached backbone features of a set of views -> option scores.

forward runs these stages (methods of CrossViewModel), in order:
  encode_views      patch tokens + image position + camera rays + time; one token per frame
  encode_entities   one token per mark (RoIAlign + box + label + role + geometry)
                    (+ each mark projected into the other calibrated views)     [entity.project]
  attend_entities   geometry-biased entity transformer + scene slots           [entity.attention]
  entity_outputs    identity embeddings, slot assignment and token bookkeeping for the losses
  token_groups      the token set by type: frames, entities, projected, slots
  fuse              fusion transformer over [question | frames | entities | slots]  [fusion.enabled]
                    (+ question-conditioned read tokens per frame)             [fusion.frame_readers]
                    (+ the question-named person's per-frame track)            [fusion.track]
  score_evidence    relevance of every frame and mark; gates on what the prefix reads  [evidence.gating]
  read_prefix       learned prefix slots read the fused set (+ summary tokens), or the
                    bag of frames when fusion is off                           [fusion.summary_tokens]
  language_head     scores each option's text after [prompt | prefix]
  read_options      (+ each option's words read the fused set: a direct score) [fusion.option_reader]
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from model.config import MAX_VIEW_COUNT, ModelConfig
from model.entities import EntityTokenizer
from model.entity_attention import EntityAttention
from model.evidence import EvidenceHead, gate_bias
from model.fact_head import MarkFactHead
from model.fusion import FusionTransformer
from model.language_head import LanguageHead
from model.readers import FrameReader, OptionReader, masked_mean
from model.track import PersonTrack
from model.view_encoder import ViewCounter, ViewEncoder


VIEW_COUNT_CLASSES = MAX_VIEW_COUNT + 1  # 0 .. MAX_VIEW_COUNT people (inputs/view_counts.py)


def token_table(ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged token ids -> (R, k) ids and mask."""
    width = max(len(x) for x in ids)
    table = torch.zeros(len(ids), width, dtype=torch.long)
    mask = torch.zeros(len(ids), width, dtype=torch.bool)
    for row, tokens in enumerate(ids):
        table[row, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[row, :len(tokens)] = True
    return table, mask


def fact_token_table(cfg: ModelConfig):
    """cfg.entity.fact_token_ids -> (C, k) ids and mask, or (None, None) (no head, or free vectors)."""
    ids = cfg.entity.fact_token_ids
    if not cfg.entity.fact_head or not ids:
        return None, None
    if len(ids) != sum(cfg.entity.fact_sizes):
        raise ValueError(f"entity.fact_token_ids has {len(ids)} classes, entity.fact_sizes "
                         f"{cfg.entity.fact_sizes} sum to {sum(cfg.entity.fact_sizes)}")
    if max(max(x) for x in ids if x) >= cfg.lm.vocab_size or not all(ids):
        raise ValueError("entity.fact_token_ids must be non-empty ids of the LM vocabulary: set them "
                         "from the tokenizer in use or to null")
    return token_table(ids)


def label_token_table(cfg: ModelConfig):
    """cfg.entity.label_token_ids (ragged) -> (max_label + 1, k) ids and mask, or (None, None)."""
    ids = cfg.entity.label_token_ids
    if not ids:
        return None, None
    if max(max(x) for x in ids if x) >= cfg.lm.vocab_size:
        raise ValueError("entity.label_token_ids exceed the LM vocabulary: set them from the "
                         "tokenizer in use (PromptTokenizer.label_token_ids) or to null")
    rows = cfg.entity.max_label + 1
    width = max(len(x) for x in ids)
    table = torch.zeros(rows, width, dtype=torch.long)
    mask = torch.zeros(rows, width, dtype=torch.bool)
    for label, tokens in enumerate(ids[:cfg.entity.max_label], start=1):
        table[label, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[label, :len(tokens)] = True
    return table, mask


class CrossViewModel(nn.Module):
    """The cross-view reasoning model over cached features (see model/README.md).

    Args:
        cfg: the ModelConfig the parts were built from (kept for checkpoints).
        view_encoder, entity_tokenizer, evidence, language_head: always present.
        entity_attention: None when cfg.entity.attention is off.
        fusion, prefix: FusionTransformer + PrefixReader, or None + BagOfFramesPrefix.
        token_proj: LM embedding width -> d_model for question tokens / tied labels, or None.
        summary: BagOfFramesPrefix appended to the prefix (cfg.fusion.summary_tokens), or None.
    """

    def __init__(self, cfg: ModelConfig, view_encoder: ViewEncoder,
                 entity_tokenizer: EntityTokenizer, entity_attention: Optional[EntityAttention],
                 fusion: Optional[FusionTransformer], prefix: nn.Module,
                 evidence: EvidenceHead, language_head: LanguageHead,
                 token_proj: Optional[nn.Module], summary: Optional[nn.Module] = None):
        super().__init__()
        self.cfg = cfg
        self.view_encoder = view_encoder
        self.entity_tokenizer = entity_tokenizer
        self.entity_attention = entity_attention
        self.fusion = fusion
        self.prefix = prefix
        self.evidence = evidence
        self.language_head = language_head
        self.token_proj = token_proj
        self.summary = summary
        self.identity = nn.Linear(cfg.d_model, cfg.entity.identity_dim)
        # Created last, so that a model without them initialises exactly as before.
        self.frame_reader = FrameReader(cfg) if cfg.fusion.enabled and cfg.fusion.frame_readers else None
        self.option_reader = OptionReader(cfg) if cfg.fusion.enabled and cfg.fusion.option_reader else None
        self.clip_gate: Optional[nn.Linear] = None
        if cfg.lm.clip_prior:
            # softplus(0 . q + b) = lm.clip_prior_gate at the start, for every question.
            self.clip_gate = nn.Linear(cfg.lm_width, 1)
            nn.init.zeros_(self.clip_gate.weight)
            nn.init.constant_(self.clip_gate.bias, math.log(math.expm1(cfg.lm.clip_prior_gate)))
        # Created last too: LayerNorm of the projected question words (fusion.question_norm).
        self.question_norm: Optional[nn.LayerNorm] = (
            nn.LayerNorm(cfg.d_model) if cfg.fusion.enabled and cfg.fusion.question_norm else None)
        # Created last too: the per-person track and its prefix token (fusion.track).
        self.track: Optional[PersonTrack] = None
        self.track_to_lm: Optional[nn.Linear] = None
        if cfg.fusion.enabled and cfg.fusion.track:
            self.track = PersonTrack(cfg, cfg.fusion.track_states)
            self.track_to_lm = nn.Linear(cfg.d_model, cfg.lm_width)
        # Created last too: the per-frame people counter (model.view_counter).
        self.view_counter: Optional[ViewCounter] = (
            ViewCounter(cfg, VIEW_COUNT_CLASSES) if cfg.view_counter else None)
        table, table_mask = label_token_table(cfg)
        self.register_buffer("label_token_ids", table, persistent=False)
        self.register_buffer("label_token_mask", table_mask, persistent=False)
        # Created last too: the mark-fact head (entity.fact_head) and its class words.
        self.fact_head: Optional[MarkFactHead] = None
        self.fact_vectors: Optional[nn.Parameter] = None
        table, table_mask = fact_token_table(cfg)
        self.register_buffer("fact_token_ids", table, persistent=False)
        self.register_buffer("fact_token_mask", table_mask, persistent=False)
        if cfg.entity.fact_head:
            self.fact_head = MarkFactHead(cfg.d_model, cfg.entity.fact_sizes)
            if table is None:
                self.fact_vectors = nn.Parameter(torch.randn(sum(cfg.entity.fact_sizes), cfg.d_model) * 0.02)

    def label_prior(self) -> Optional[torch.Tensor]:
        """(max_label + 1, D): projected mean LM embedding of each label's words; row 0 zero."""
        if self.label_token_ids is None:
            return None
        embedded = self.language_head.embed(self.label_token_ids)  # (R, k, W)
        weight = self.label_token_mask.to(embedded.dtype).unsqueeze(-1)
        mean = (embedded * weight).sum(1) / weight.sum(1).clamp_min(1.0)
        return self.token_proj(mean) * self.label_token_mask.any(-1, keepdim=True)

    def fact_classes(self) -> torch.Tensor:
        """(C, D): each mark-fact class's vector, the projected mean LM embedding of its words
        (or a free vector without entity.fact_token_ids)."""
        if self.fact_vectors is not None:
            return self.fact_vectors
        embedded = self.language_head.embed(self.fact_token_ids)  # (C, k, W)
        weight = self.fact_token_mask.to(embedded.dtype).unsqueeze(-1)
        return self.token_proj((embedded * weight).sum(1) / weight.sum(1))

    def forward(self, batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Score every option of every sample.

        Args (batch keys; B samples, V views, T frames, P patches, C width, M marks,
        L prompt tokens, O options, Lo option tokens):
            patch_tokens (B, V, T, P, C) float; pooled (B, V, T, C') float;
            frame_mask (B, V, T) bool; view_mask (B, V) bool; frame_time (B, V, T) float s;
            camera_K (B, V, 3, 3); camera_R (B, V, 3, 3); camera_t (B, V, 3);
            image_hw (B, V, 2) (height, width); has_camera (B, V) bool;
            mark_boxes (B, V, T, M, 4) pixel x0 y0 x1 y1; mark_label (B, V, T, M) long;
            mark_mask (B, V, T, M) bool;
            prompt_ids, prompt_mask (B, L); option_ids, option_mask (B, O, Lo);
            option_valid (B, O) bool.
        Returns:
            option_logits (B, O): mean option-text log-likelihood; -1e4 for invalid options.
            option_token_logprobs (B, O, Lo): per-token log-probs, 0 at padding.
            evidence_logits (B, V, T): relevance of each frame; -1e4 at padding.
            entity_evidence_logits (B, V, T, M): relevance of each mark; -1e4 at padding.
            entity_token_index (B, N, 3) long: (v, t, m) of entity token n, N = V * T * M.
            entity_token_mask (B, N) bool: real mark in a real frame of a real view.
            entity_embed (B, N, E): L2-normalised identity embedding (0 at padding), for a
                contrastive identity loss (same person across views/frames = similar).
            entity_identity (B, V, T, M, E): the same, unflattened (index with mark_mask).
            entity_floor_xy (B, N, 2), entity_floor_ok (B, N): canonical feet floor point.
            entity_assign_logits, entity_attn (B, N, S): token-to-scene-slot logits and
                softmax (rows 0 at padding). Only when entity attention is on.
            prefix (B, K, W): the LM prefix embeddings.
            track_logits (B, V, T, S): per-(view, frame) state logits of the person track,
                track_locate (B, V, T, 1 + P) where its locator looked (only with fusion.track).
            count_logits (B, V, T, K): people-count logits of every frame, K = MAX_VIEW_COUNT + 1
                (only with model.view_counter).
            mark_fact_logits (B, V, T, M, C): each mark token (after fusion) scored against every
                class of every fact, C = sum(entity.fact_sizes), and mark_fact_of_class (C,) long,
                the fact of each class (only with entity.fact_head).
        """
        views = self.encode_views(batch)
        entities, projected = self.encode_entities(views, batch)
        attended = self.attend_entities(entities, projected)
        # The entity outputs before fusion, as the model has always built them: autograd sums a
        # tensor's gradients in the order its uses were recorded, so building them later moves
        # the weights by ~1e-8 per step (and a seeded run's figures with them).
        entity_out = self.entity_outputs(entities, attended, batch)
        groups, masks = self.token_groups(views, entities, projected, attended)
        fused, masks, track = self.fuse(views, groups, masks, batch)
        evidence, gates = self.score_evidence(views, fused, entities["mask"])
        prefix = self.read_prefix(groups, fused, masks, gates, track, batch["mark_mask"], entities["tokens"])
        scores = self.language_head(prefix, batch["prompt_ids"], batch["prompt_mask"],
                                    batch["option_ids"], batch["option_mask"], batch["option_valid"])
        if self.option_reader is not None:
            scores["option_logits"] = scores["option_logits"] + self.read_options(fused, masks, gates, batch)
        if self.clip_gate is not None:
            scores["option_logits"] = scores["option_logits"] + self.clip_prior(batch)
        if track is not None:
            entity_out.update(self.track_outputs(track))
        if "count_logits" in views:
            entity_out["count_logits"] = views["count_logits"]
        if self.fact_head is not None:
            logits = self.fact_head(fused["entity"], self.fact_classes())
            entity_out["mark_fact_logits"] = logits.view(*batch["mark_mask"].shape, -1)
            entity_out["mark_fact_of_class"] = self.fact_head.fact_of_class
        return {**scores, **entity_out,
                "evidence_logits": evidence["frame"],
                "entity_evidence_logits": evidence["entity"].view(batch["mark_mask"].shape),
                "prefix": prefix}

    # The stages of forward, in order.

    def encode_views(self, batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """ViewEncoder: patch tokens with image position, camera rays and time; one token per
        frame. Adds "frame_mask" (B, V, T): a real frame of a real view."""
        views = self.view_encoder(batch)
        views["frame_mask"] = batch["frame_mask"] & batch["view_mask"].unsqueeze(-1)
        if self.view_counter is not None:
            counted = self.view_counter(batch["patch_tokens"])
            views["frame"] = views["frame"] + counted["token"]
            views["count_logits"], views["count_cells"] = counted["logits"], counted["cells"]
        return views

    def encode_entities(self, views: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor]
                        ) -> Tuple[Dict[str, torch.Tensor], Optional[Dict[str, torch.Tensor]]]:
        """One token per mark (EntityTokenizer), and, with entity.project and cameras, one
        "projected" token per mark and other calibrated view (else None)."""
        label_prior = self.label_prior()
        entities = self.entity_tokenizer(views["patch"], views["grid"], batch, views["offset"],
                                         label_prior)
        if self.view_counter is not None:  # what each mark's box holds, counted (model/view_encoder.py)
            region = self.view_counter.regions(views["count_cells"], batch["mark_boxes"], batch["image_hw"],
                                               views["grid"])
            b, n, d = entities["tokens"].shape
            entities["tokens"] = entities["tokens"] + region.reshape(b, n, d) * entities["mask"].unsqueeze(-1)
        projected = None
        if self.cfg.entity.project and self.cfg.camera.enabled:
            projected = self.entity_tokenizer.project(views["patch"], views["grid"], batch,
                                                      views["offset"], label_prior)
        return entities, projected

    def attend_entities(self, entities: Dict[str, torch.Tensor],
                        projected: Optional[Dict[str, torch.Tensor]]) -> Dict[str, Optional[torch.Tensor]]:
        """The geometry-biased entity transformer with scene slots over mark (and projected)
        tokens. Returns "tokens", "projected" (or None), "slots" and "assign_logits" (both
        None when entity attention is off: the tokens pass through unchanged)."""
        attended = {"tokens": entities["tokens"], "slots": None, "assign_logits": None,
                    "projected": None if projected is None else projected["tokens"]}
        if self.entity_attention is None:
            return attended
        n_entity = entities["mask"].shape[1]
        joint = entities if projected is None else {
            key: torch.cat([entities[key], projected[key]], 1)
            for key in ("tokens", "mask", "floor_xy", "floor_ok", "index")}
        out = self.entity_attention(joint)
        attended.update(tokens=out["tokens"][:, :n_entity], slots=out["slots"],
                        assign_logits=out["assign_logits"][:, :n_entity])
        if projected is not None:
            attended["projected"] = out["tokens"][:, n_entity:]
        return attended

    def token_groups(self, views: Dict[str, torch.Tensor], entities: Dict[str, torch.Tensor],
                     projected: Optional[Dict[str, torch.Tensor]], attended: Dict[str, Optional[torch.Tensor]]
                     ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
        """The token set the prefix is read from, by type: "frame" (B, V*T, D), "entity",
        "projected" and "slot" when present; and their masks."""
        b, v, t, d = views["frame"].shape
        groups = {"frame": views["frame"].reshape(b, v * t, d), "entity": attended["tokens"]}
        masks = {"frame": views["frame_mask"].reshape(b, v * t), "entity": entities["mask"]}
        if attended["projected"] is not None:
            groups["projected"] = attended["projected"]
            masks["projected"] = projected["mask"]
        slots = attended["slots"]
        if slots is not None:
            groups["slot"] = slots
            masks["slot"] = torch.ones(slots.shape[:2], dtype=torch.bool, device=slots.device)
        return groups, masks

    def fuse(self, views: Dict[str, torch.Tensor], groups: Dict[str, torch.Tensor],
             masks: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor]
             ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor], Optional[Dict[str, torch.Tensor]]]:
        """The fusion transformer over the question tokens, every group and (with
        fusion.frame_readers / fusion.track) the frame readers' and the person track's tokens;
        a no-op when fusion is off. Returns the fused groups (with "question", and "read" /
        "track"), their masks, and the track's outputs (model/track.py) or None."""
        if self.fusion is None:
            return groups, masks, None
        question = self.question_tokens(batch["prompt_ids"])
        groups = {**groups, "question": question}
        masks = {**masks, "question": batch["prompt_mask"]}
        if self.frame_reader is not None:
            groups["read"], masks["read"] = self.frame_reader(
                views["patch"], views["frame_mask"], question, batch["prompt_mask"])
        track = None
        if self.track is not None:
            track = self.run_track(views, question, batch)
            groups["track"], masks["track"] = track["tokens"], track["mask"]
        return self.fusion(groups, masks), masks, track

    def run_track(self, views: Dict[str, torch.Tensor], question: torch.Tensor,
                  batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The person track (model/track.py) on the views' patches and the question tokens;
        with fusion.track_oracle the batch's recorded states replace the predicted ones."""
        assert self.track is not None
        oracle = None
        if self.cfg.fusion.track_oracle:
            if "track_target" not in batch:
                raise ValueError("model.fusion.track_oracle is on but the batch has no track_target "
                                 "(inputs/items.py builds it from the generator's metadata)")
            oracle = batch["track_target"]
        teacher = None
        fusion = self.cfg.fusion
        if self.training and fusion.track_box_read and fusion.track_box_teacher and "track_box_flag" in batch:
            teacher = (batch["track_box"], batch["track_box_flag"])
        return self.track(views["patch"], views["frame_mask"], question, batch["prompt_mask"], oracle, teacher)

    def forward_track(self, batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Only what the person track's state logits depend on: the view encoder, the question
        tokens and the track; no entities, fusion, evidence or language head. The track's own
        stage (a loss with only ``loss.track``, configs/track_stage.yaml) trains through it at
        about half the cost of ``forward`` per step, with the same track logits.

        Returns:
            track_logits (B, V, T, S) and track_locate (B, V, T, 1 + P), as ``forward`` returns them.
        """
        if self.track is None:
            raise ValueError("forward_track needs model.fusion.enabled and model.fusion.track")
        views = self.encode_views(batch)
        return self.track_outputs(self.run_track(views, self.question_tokens(batch["prompt_ids"]), batch))

    @staticmethod
    def track_outputs(track: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The track's outputs under the model's keys (the losses' and the probes' inputs):
        track_logits, track_locate, and track_box_pred with fusion.track_box_read."""
        out = {"track_logits": track["state_logits"], "track_locate": track["locate"]}
        if "box" in track:
            out["track_box_pred"] = track["box"]
        return out

    def question_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """Token ids (..., L) -> projected LM embeddings (..., L, D), LayerNormed with
        fusion.question_norm (the fusion's and option reader's view of the words)."""
        tokens = self.token_proj(self.language_head.embed(ids))
        return tokens if self.question_norm is None else self.question_norm(tokens)

    def score_evidence(self, views: Dict[str, torch.Tensor], fused: Dict[str, torch.Tensor],
                       entity_mask: torch.Tensor
                       ) -> Tuple[Dict[str, torch.Tensor], Dict[str, Optional[torch.Tensor]]]:
        """Relevance of every frame and mark (EvidenceHead), and the gates (additive
        attention biases <= 0, or None) they put on what the prefix reads, per group."""
        b, v, t, d = views["frame"].shape
        evidence = self.evidence(fused["frame"].view(b, v, t, d), views["frame_mask"],
                                 fused["entity"], entity_mask)
        gates: Dict[str, Optional[torch.Tensor]] = {name: None for name in fused}
        if self.cfg.evidence.gating:
            gates["frame"] = gate_bias(evidence["frame"]).reshape(b, v * t)
            gates["entity"] = gate_bias(evidence["entity"])
        return evidence, gates

    def read_prefix(self, groups: Dict[str, torch.Tensor],
                    fused: Dict[str, torch.Tensor], masks: Dict[str, torch.Tensor],
                    gates: Dict[str, Optional[torch.Tensor]],
                    track: Optional[Dict[str, torch.Tensor]] = None,
                    mark_mask: Optional[torch.Tensor] = None,
                    raw_entities: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The LM prefix (B, K, W). With fusion: learned slots read every fused token (gated),
        then the summary tokens (the bag of unfused frame and entity tokens) if configured
        (first without fusion.summary_last), then the person track's pooled token
        (fusion.track). With fusion.track_last "unmarked", a question with marks (mark_mask
        (B, V, T, M) has one) gets the track token before the summary tokens instead, so they
        stay last. With fusion.summary_entities "raw" the summary pools raw_entities (B, N, D),
        the mark tokens before the entity transformer. Without fusion: the bag of frames
        (BagOfFramesPrefix over frames and slots or entities)."""
        if self.fusion is None:
            names = ["frame", "slot" if "slot" in groups else "entity"]
            return self.prefix([groups[n] for n in names], [masks[n] for n in names],
                               [gates[n] for n in names])
        prefix = self.prefix(*self.fused_set(fused, masks, gates, list(fused)))
        summary = None
        if self.summary is not None:
            # The bag-of-frames tokens: a shallow path to the LM.
            entity = groups["entity"]
            if self.cfg.fusion.summary_entities == "raw":
                if raw_entities is None:
                    raise ValueError("model.fusion.summary_entities='raw' needs the raw entity tokens")
                entity = raw_entities
            summary = self.summary([groups["frame"], entity], [masks["frame"], masks["entity"]],
                                   [gates["frame"], gates["entity"]])
            prefix = torch.cat([prefix, summary] if self.cfg.fusion.summary_last else [summary, prefix], 1)
        if track is None:
            return prefix
        token = self.track_to_lm(track["pooled"])  # (B, 1, W); the last context token: the
        last = torch.cat([prefix, token], 1)       # shortest path to the option's words
        if self.cfg.fusion.track_last == "all" or summary is None or not self.cfg.fusion.summary_last:
            return last
        if mark_mask is None:
            raise ValueError("model.fusion.track_last='unmarked' needs the batch's mark_mask")
        k = summary.shape[1]
        before = torch.cat([prefix[:, :-k], token, prefix[:, -k:]], 1)  # the summary stays last
        marked = mark_mask.flatten(1).any(1)
        return torch.where(marked[:, None, None], before, last)

    @staticmethod
    def fused_set(fused: Dict[str, torch.Tensor], masks: Dict[str, torch.Tensor],
                  gates: Dict[str, Optional[torch.Tensor]], names: list
                  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The fused groups ``names`` as one set: tokens (B, N, D), mask (B, N) and gate (B, N)
        (0 for a group without one), what the prefix and option readers read."""
        dtype = fused[names[0]].dtype
        gate = [gates[n] if gates[n] is not None else torch.zeros_like(masks[n], dtype=dtype) for n in names]
        return (torch.cat([fused[n] for n in names], 1), torch.cat([masks[n] for n in names], 1),
                torch.cat(gate, 1))

    def read_options(self, fused: Dict[str, torch.Tensor], masks: Dict[str, torch.Tensor],
                     gates: Dict[str, Optional[torch.Tensor]], batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        """OptionReader scores (B, O): each option's words, with the pooled fused question,
        read every fused token (gated like the prefix); 0 for padded options."""
        memory, memory_mask, gate = self.fused_set(fused, masks, gates, [n for n in fused if n != "question"])
        question = masked_mean(fused["question"], masks["question"])
        options = self.question_tokens(batch["option_ids"])
        score = self.option_reader(options, batch["option_mask"], question, memory, memory_mask, gate)
        return score.masked_fill(~batch["option_valid"], 0.0)

    def clip_prior(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, O) the CLIP zero-shot logit of each option (lm.clip_prior): the cosine of its
        caption (batch "option_clip", scaled, inputs/clip_text.py) with every real frame's
        pooled image embedding, averaged over frames, times a learned gate of the question."""
        if "option_clip" not in batch:
            raise ValueError("model.lm.clip_prior is on but the batch has no option_clip: build the "
                             "tokenizer with inputs.text.build_tokenizer(model_cfg)")
        image = F.normalize(batch["pooled"].float(), dim=-1)  # (B, V, T, E)
        frames = (batch["frame_mask"] & batch["view_mask"].unsqueeze(-1)).float()
        sim = torch.einsum("bvte,boe->bvto", image, batch["option_clip"].float())
        sim = (sim * frames.unsqueeze(-1)).sum((1, 2)) / frames.sum((1, 2)).clamp_min(1.0).unsqueeze(-1)
        question = masked_mean(self.language_head.embed(batch["prompt_ids"]), batch["prompt_mask"])
        gate = F.softplus(self.clip_gate(question))  # (B, 1)
        return (gate * sim).to(batch["pooled"].dtype).masked_fill(~batch["option_valid"], 0.0)

    def entity_outputs(self, entities: Dict[str, torch.Tensor],
                       attended: Dict[str, Optional[torch.Tensor]], batch: Dict[str, torch.Tensor]
                       ) -> Dict[str, torch.Tensor]:
        """What the entity losses read: identity embeddings, token index / mask / floor
        points, and the slot assignment when entity attention is on."""
        mask = entities["mask"]
        out = {}
        if attended["assign_logits"] is not None:
            out["entity_assign_logits"] = attended["assign_logits"]
            out["entity_attn"] = attended["assign_logits"].softmax(-1) * mask.unsqueeze(-1)
        embed = F.normalize(self.identity(attended["tokens"]), dim=-1) * mask.unsqueeze(-1)
        out.update({
            "entity_embed": embed,
            "entity_identity": embed.view(*batch["mark_mask"].shape, -1),
            "entity_token_index": entities["index"],
            "entity_token_mask": mask,
            "entity_floor_xy": entities["floor_xy"],
            "entity_floor_ok": entities["floor_ok"],
        })
        return out
