"""Question + options -> token ids for the model's language head.

The prompt template is data (declared once here, snapshot-tested). The model scores each
option's continuation after the prompt, so `encode` returns the prompt ids and one id
sequence per option: the option's words (default) or its letter (`score_option="letter"`).
Tokenizers: the open_clip SimpleTokenizer (default; ships its vocabulary, works offline) or
the HF tokenizer of a local pretrained LM (`lm_path`).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from bench.constants import LETTERS

PROMPT_TEMPLATE = "Question: {question} Options: {options} Answer:"
OPTION_TEMPLATE = "({letter}) {text}"


def format_prompt(question: str, options: Sequence[str]) -> str:
    """'Question: ... Options: (A) ... (B) ... Answer:'."""
    listed = " ".join(OPTION_TEMPLATE.format(letter=LETTERS[i], text=text)
                      for i, text in enumerate(options))
    return PROMPT_TEMPLATE.format(question=question.strip(), options=listed)


class PromptTokenizer:
    """Turns (question, options) into prompt_ids / option_ids.

    Args:
        tokenizer: None for the open_clip SimpleTokenizer, or an HF tokenizer.
        score_option: "text" scores the option's words, "letter" its letter.
        max_prompt_len: prompts longer than this keep their END (the options and "Answer:").
    """

    def __init__(self, tokenizer: Any = None, score_option: str = "text",
                 max_prompt_len: int = 256):
        if score_option not in ("text", "letter"):
            raise ValueError(f"score_option must be 'text' or 'letter', got {score_option!r}")
        if tokenizer is None:
            import open_clip

            tokenizer = open_clip.get_tokenizer("ViT-B-32")  # vocabulary ships with open_clip
        self.tokenizer = tokenizer
        self.score_option = score_option
        self.max_prompt_len = max_prompt_len
        self.is_hf = hasattr(tokenizer, "convert_tokens_to_ids")
        self.clip_text = None  # inputs.clip_text.ClipTextEncoder, set by build_tokenizer (lm.clip_prior)

    @property
    def vocab_size(self) -> int:
        """Size of the LM vocabulary these ids index (LanguageHeadConfig.vocab_size)."""
        return len(self.tokenizer) if self.is_hf else self.tokenizer.vocab_size

    @property
    def pad_id(self) -> int:
        """Padding id (always masked out; LanguageHeadConfig.pad_id)."""
        if self.is_hf:
            tok = self.tokenizer
            return tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        return 0

    def ids(self, text: str, continuation: bool = False) -> list[int]:
        """Token ids of `text` without special tokens. A continuation gets the leading space a
        byte-level BPE expects after "Answer:" (the CLIP tokenizer ignores spacing)."""
        if self.is_hf:
            return self.tokenizer(" " + text if continuation else text,
                                  add_special_tokens=False)["input_ids"]
        return self.tokenizer.encode(text)

    def encode(self, question: str, options: Sequence[str]) -> dict[str, Any]:
        """One sample.

        Returns:
            "prompt_ids": (L,) long; "option_ids": list of O (Lo_i,) long tensors (never empty).
        """
        prompt = self.ids(format_prompt(question, options))[-self.max_prompt_len:]
        option_ids = []
        for i, text in enumerate(options):
            target = LETTERS[i] if self.score_option == "letter" else text
            ids = self.ids(target, continuation=True) or self.ids(LETTERS[i], continuation=True)
            option_ids.append(torch.tensor(ids, dtype=torch.long))
        out = {"prompt_ids": torch.tensor(prompt, dtype=torch.long), "option_ids": option_ids}
        if self.clip_text is not None:
            out["option_clip"] = self.clip_text(question, options)
        return out

    def label_token_ids(self, max_label: int = 15) -> list[list[int]]:
        """Token ids of the label words "1".."max_label" (EntityConfig.label_token_ids)."""
        return [self.ids(str(label), continuation=True) for label in range(1, max_label + 1)]


def collate_text(encoded: Sequence[dict[str, Any]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad `PromptTokenizer.encode` outputs into the model's text batch.

    Returns:
        prompt_ids, prompt_mask (B, L); option_ids, option_mask (B, O, Lo); option_valid (B, O);
        option_clip (B, O, E) when the tokenizer has a CLIP text tower (lm.clip_prior).
    """
    b = len(encoded)
    length = max(len(e["prompt_ids"]) for e in encoded)
    n_opt = max(len(e["option_ids"]) for e in encoded)
    opt_len = max(len(ids) for e in encoded for ids in e["option_ids"])
    out = {
        "prompt_ids": torch.full((b, length), pad_id, dtype=torch.long),
        "prompt_mask": torch.zeros(b, length, dtype=torch.bool),
        "option_ids": torch.full((b, n_opt, opt_len), pad_id, dtype=torch.long),
        "option_mask": torch.zeros(b, n_opt, opt_len, dtype=torch.bool),
    }
    for i, e in enumerate(encoded):
        n = len(e["prompt_ids"])
        out["prompt_ids"][i, :n] = e["prompt_ids"]
        out["prompt_mask"][i, :n] = True
        for j, ids in enumerate(e["option_ids"]):
            out["option_ids"][i, j, :len(ids)] = ids
            out["option_mask"][i, j, :len(ids)] = True
    out["option_valid"] = out["option_mask"].any(-1)
    if "option_clip" in encoded[0]:
        dim = encoded[0]["option_clip"].shape[-1]
        out["option_clip"] = torch.zeros(b, n_opt, dim)
        for i, e in enumerate(encoded):
            out["option_clip"][i, :len(e["option_clip"])] = e["option_clip"]
    return out


def build_tokenizer(model_cfg: Any, hf_tokenizer: Optional[Any] = None, clip_text: Optional[Any] = None) -> PromptTokenizer:
    """The tokenizer a ModelConfig implies: the LM's own HF tokenizer when `lm.lm_path` is set,
    otherwise the open_clip SimpleTokenizer. With ``lm.clip_prior`` it also carries the backbone's
    text side: ``clip_text`` when given (``inputs.backbone.build_components`` passes the one it
    loaded with the tower), else one loaded from ``model.backbone.pretrained``."""
    lm = model_cfg.lm
    if hf_tokenizer is None and lm.lm_path:
        from transformers import AutoTokenizer

        hf_tokenizer = AutoTokenizer.from_pretrained(lm.lm_path, gguf_file=lm.gguf_file,
                                                     local_files_only=True)
    tokenizer = PromptTokenizer(hf_tokenizer, score_option=lm.score_option,
                                max_prompt_len=model_cfg.fusion.max_question_len)
    if lm.clip_prior:
        from inputs.clip_text import ClipTextEncoder
        backbone = model_cfg.backbone
        if backbone.pooled_source != "clip":
            raise ValueError("model.lm.clip_prior compares CLIP text with the cached pooled image embedding: "
                             f"it needs model.backbone.pooled_source=clip, not {backbone.pooled_source!r}")
        tokenizer.clip_text = clip_text if clip_text is not None else ClipTextEncoder.from_pretrained(backbone.pretrained)
        if tokenizer.clip_text.dim != model_cfg.pooled_dim:
            raise ValueError(f"model.lm.clip_prior: the text embedding has {tokenizer.clip_text.dim} values, "
                             f"the pooled image embedding (model.pooled_dim) {model_cfg.pooled_dim}")
    return tokenizer
