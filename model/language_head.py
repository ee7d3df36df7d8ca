"""Language head: a causal LM reads [visual prefix | prompt] and scores each option.

Scoring = the option TEXT as a continuation, mean token log-likelihood (length-normalised).
Why text, not the letter: scoring "(B)" asks a small LM trained from scratch to learn a
pointer ("which option in the prompt is the answer, then emit its letter"), which needs
many examples; scoring the option's own words ("3", "the person marked 2") ties the visual
prefix directly to the answer's token embeddings (GPT-2 ties input and output embeddings),
a one-hop path that learns from a few thousand questions. Mean, not sum: options differ in
length ("2" vs "None of the above") and a sum would favour short ones. Training applies
cross-entropy over these scores, so the head is discriminative and no text is parsed.
Whatever token ids arrive in option_ids are scored, so letter scoring is a tokenizer choice
(inputs/text.py), not a model change.
"""
from __future__ import annotations

import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedModel

from model.attention import NEG_INF
from model.config import LanguageHeadConfig


def build_gpt2(cfg: LanguageHeadConfig, width: int, dropout: float) -> GPT2LMHeadModel:
    """A small randomly initialised GPT-2 on the tokenizer's vocabulary."""
    config = GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=cfg.max_positions, n_embd=width,
        n_layer=cfg.layers, n_head=cfg.heads, resid_pdrop=dropout, embd_pdrop=dropout,
        attn_pdrop=dropout, bos_token_id=cfg.pad_id, eos_token_id=cfg.pad_id,
        pad_token_id=cfg.pad_id, tie_word_embeddings=True,
    )
    return GPT2LMHeadModel(config)


def load_causal_lm(path: str, gguf_file: Optional[str] = None) -> PreTrainedModel:
    """Load a local pretrained causal LM (a folder, optionally a GGUF file inside it).

    The caller owns the path; nothing is downloaded (set HF_HUB_OFFLINE=1).
    """
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf_file, local_files_only=True)


def left_align(ids: torch.Tensor, mask: torch.Tensor):
    """Move right-padding to the left so the last prompt token sits at index L - 1.

    ids, mask: (B, L) -> same shapes, each row rolled right by its number of pads.
    """
    length = ids.shape[1]
    pads = length - mask.sum(1, keepdim=True)
    source = (torch.arange(length, device=ids.device).unsqueeze(0) - pads) % length
    return ids.gather(1, source), mask.gather(1, source)


class LanguageHead(nn.Module):
    """Wraps a transformers causal LM and scores options by continuation log-likelihood.

    Args:
        lm: a transformers causal LM (GPT2LMHeadModel from `build_gpt2`, or a pretrained one).
        cfg: LanguageHeadConfig (length_norm, freeze_lm).
    """

    def __init__(self, lm: PreTrainedModel, cfg: LanguageHeadConfig):
        super().__init__()
        self.lm = lm
        self.cfg = cfg
        if cfg.freeze_lm:
            lm.requires_grad_(False)
        # A shallow second path to the answer: option embedding x prefix slot, bilinear. The
        # likelihood path needs the LM to learn to emit a word from a prefix slot; this one
        # only needs one matrix, so the answer loss reaches the visual side from step one.
        # Zero-initialised: the scores start as pure likelihoods.
        self.option_match: Optional[nn.Linear] = None
        if cfg.option_match:
            self.option_match = nn.Linear(self.width, self.width, bias=False)
            nn.init.zeros_(self.option_match.weight)

    @property
    def width(self) -> int:
        return self.lm.get_input_embeddings().weight.shape[1]

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token ids (...) -> LM input embeddings (..., width)."""
        return self.lm.get_input_embeddings()(ids)

    def option_token_logprobs(self, first: torch.Tensor, rest: torch.Tensor,
                              option_ids: torch.Tensor, option_mask: torch.Tensor) -> torch.Tensor:
        """log p(option token j | context, option tokens < j), 0 at padding.

        The vocabulary projection dominates the cost (~49k words per position), so it runs
        only where needed: once per sample for the first token (its predictor, the last
        context token, is shared by all options), and at non-padding positions after that.

        Args:
            first: (B, W) hidden state of the last context token.
            rest: (B, O, Lo - 1, W) hidden states of option tokens 0 .. Lo - 2.
            option_ids, option_mask: (B, O, Lo).
        Returns:
            (B, O, Lo) float log-probs.
        """
        if self.cfg.softmax == "options":
            return self.option_softmax_logprobs(first, rest, option_ids, option_mask)
        head = self.lm.get_output_embeddings()
        first_logprobs = F.log_softmax(head(first).float(), dim=-1)  # (B, vocab)
        out = torch.zeros(option_ids.shape, dtype=first_logprobs.dtype, device=first.device)
        out[:, :, 0] = first_logprobs.gather(1, option_ids[:, :, 0]) * option_mask[:, :, 0]
        later = option_mask[:, :, 1:]
        if later.any():
            logprobs = F.log_softmax(head(rest[later]).float(), dim=-1)
            targets = option_ids[:, :, 1:][later].unsqueeze(-1)
            out[:, :, 1:][later] = logprobs.gather(1, targets).squeeze(-1)
        return out

    def option_softmax_logprobs(self, first: torch.Tensor, rest: torch.Tensor,
                                option_ids: torch.Tensor, option_mask: torch.Tensor) -> torch.Tensor:
        """As `option_token_logprobs`, normalised over the distinct tokens of the sample's own
        options (``lm.softmax: options``) instead of the whole vocabulary: the output layer is
        evaluated on those few rows only. Depends on the sample alone, never on the batch."""
        b, o, lo = option_ids.shape
        head = self.lm.get_output_embeddings()
        # The sample's distinct option tokens: sort, keep the first of each run of equal ids.
        flat = option_ids.reshape(b, o * lo).masked_fill(~option_mask.reshape(b, o * lo), -1)
        ids, _ = flat.sort(dim=1)
        distinct = (ids >= 0) & torch.cat([torch.ones_like(ids[:, :1], dtype=torch.bool),
                                           ids[:, 1:] != ids[:, :-1]], 1)
        weight = head.weight[ids.clamp_min(0)]  # (B, C, W)
        bias = getattr(head, "bias", None)
        hidden = torch.cat([first.unsqueeze(1), rest.reshape(b, o * (lo - 1), first.shape[-1])], 1)  # (B, 1 + O(Lo-1), W)
        logits = torch.einsum("bnw,bcw->bnc", hidden, weight).float()
        if bias is not None:
            logits = logits + bias[ids.clamp_min(0)].unsqueeze(1).float()
        norm = torch.logsumexp(logits.masked_fill(~distinct.unsqueeze(1), -1e9), dim=-1)  # (B, N)
        # The target's logit: any position of the sorted ids that holds it.
        target = torch.cat([option_ids[:, :, 0], option_ids[:, :, 1:].reshape(b, -1)], 1)  # (B, O + O(Lo-1))
        where = (ids.unsqueeze(1) == target.unsqueeze(-1)).float().argmax(-1)  # (B, O + O(Lo-1))
        first_norm = norm[:, :1].expand(b, o)
        rest_norm = norm[:, 1:].reshape(b, o, lo - 1)
        first_logit = logits[:, 0].gather(1, where[:, :o])  # (B, O)
        rest_logit = logits[:, 1:].reshape(b, o, lo - 1, ids.shape[1]).gather(
            -1, where[:, o:].reshape(b, o, lo - 1, 1)).squeeze(-1)  # (B, O, Lo - 1)
        out = torch.cat([(first_logit - first_norm).unsqueeze(-1), rest_logit - rest_norm], -1)
        return out * option_mask

    def forward(self, prefix: torch.Tensor, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                option_ids: torch.Tensor, option_mask: torch.Tensor,
                option_valid: torch.Tensor) -> Dict[str, torch.Tensor]:
        """
        Args:
            prefix: (B, K, W) visual prefix embeddings (W = LM width).
            prompt_ids, prompt_mask: (B, L) right-padded question + options text.
            option_ids, option_mask: (B, O, Lo) right-padded option continuations.
            option_valid: (B, O) bool; padded options get NEG_INF.
        Returns:
            "option_logits": (B, O) mean (or summed) log-likelihood per option.
            "option_token_logprobs": (B, O, Lo) per-token log-probs, 0 at padding.
        """
        b, k, w = prefix.shape
        o, lo = option_ids.shape[1:]
        prompt_ids, prompt_mask = left_align(prompt_ids, prompt_mask)
        prompt = self.embed(prompt_ids)
        prefix_mask = prompt_mask.new_ones(b, k)
        if self.cfg.prefix_after_prompt:
            context = torch.cat([prompt, prefix], dim=1)  # (B, L + K, W)
            context_mask = torch.cat([prompt_mask, prefix_mask], dim=1)
        else:
            context = torch.cat([prefix, prompt], dim=1)  # (B, K + L, W)
            context_mask = torch.cat([prefix_mask, prompt_mask], dim=1)
        # The context is shared by all options: encode it once, then run the O option
        # continuations of each sample against its cached keys / values.
        base = self.lm.base_model
        context_positions = (context_mask.long().cumsum(1) - 1).clamp_min(0)
        encoded = base(inputs_embeds=context, attention_mask=context_mask.long(),
                       position_ids=context_positions, use_cache=True)
        cache = encoded["cache"] if "cache" in encoded else encoded.past_key_values
        cache.batch_repeat_interleave(o)
        flat_option_mask = option_mask.reshape(b * o, lo)
        mask = torch.cat([context_mask.repeat_interleave(o, dim=0), flat_option_mask], dim=1)
        positions = context_positions[:, -1:].repeat_interleave(o, dim=0) + flat_option_mask.long().cumsum(1)
        continued = base(inputs_embeds=self.embed(option_ids).reshape(b * o, lo, w),
                         attention_mask=mask.long(), position_ids=positions,
                         cache=cache).last_hidden_state.view(b, o, lo, w)
        # The last context token predicts option token 0; option token j predicts token j + 1.
        token_logprobs = self.option_token_logprobs(encoded.last_hidden_state[:, -1],
                                                    continued[:, :, :-1], option_ids, option_mask)
        total = token_logprobs.sum(-1)
        count = option_mask.sum(-1).clamp_min(1).to(total.dtype)
        scores = total / count if self.cfg.length_norm else total
        if self.option_match is not None:
            weight = option_mask.unsqueeze(-1).to(prefix.dtype)
            option_vec = (self.embed(option_ids) * weight).sum(2) / weight.sum(2).clamp_min(1.0)  # (B, O, W)
            sim = torch.einsum("bow,bkw->bok", option_vec, self.option_match(prefix)) / math.sqrt(w)
            scores = scores + torch.logsumexp(sim.float(), dim=-1) - math.log(k)  # 0 at init
        valid = option_valid & option_mask.any(-1)
        return {"option_logits": scores.masked_fill(~valid, NEG_INF),
                "option_token_logprobs": token_logprobs}
