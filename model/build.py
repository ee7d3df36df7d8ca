"""Assemble a CrossViewModel from its config (which parts exist, which LM, embedding init)."""
from __future__ import annotations

import dataclasses
from typing import Optional

from torch import nn
from transformers import PreTrainedModel

from model.config import CLIP_LABEL_TOKEN_IDS, MARK_FACT_TOKEN_IDS, ModelConfig
from model.crossview import CrossViewModel
from model.entities import EntityTokenizer
from model.entity_attention import EntityAttention
from model.evidence import EvidenceHead
from model.fusion import BagOfFramesPrefix, FusionTransformer, PrefixReader
from model.language_head import LanguageHead, build_gpt2, load_causal_lm
from model.view_encoder import ViewEncoder


def build_model(cfg: ModelConfig, lm: Optional[PreTrainedModel] = None) -> CrossViewModel:
    """Assemble a CrossViewModel from its config.

    Args:
        cfg: ModelConfig; its switches decide which parts exist.
        lm: optional pretrained causal LM (see language_head.load_causal_lm); its width and
            vocabulary then override cfg.lm.width / vocab_size. Default: a small random GPT-2.
    """
    if lm is None and cfg.lm.lm_path:
        lm = load_causal_lm(cfg.lm.lm_path, cfg.lm.gguf_file)
        if cfg.entity.label_token_ids == [list(x) for x in CLIP_LABEL_TOKEN_IDS]:
            # The default ids belong to the open_clip tokenizer, not to this LM's.
            cfg = dataclasses.replace(cfg, entity=dataclasses.replace(cfg.entity, label_token_ids=None))
        if cfg.entity.fact_token_ids == [list(x) for x in MARK_FACT_TOKEN_IDS]:
            cfg = dataclasses.replace(cfg, entity=dataclasses.replace(cfg.entity, fact_token_ids=None))
    if lm is not None:
        width = lm.get_input_embeddings().weight.shape[1]
        cfg = dataclasses.replace(cfg, lm=dataclasses.replace(
            cfg.lm, width=width, vocab_size=lm.get_input_embeddings().weight.shape[0]))
    else:
        lm = build_gpt2(cfg.lm, cfg.lm_width, cfg.dropout)
    needs_token_proj = (cfg.fusion.enabled or bool(cfg.entity.label_token_ids)
                        or (cfg.entity.fact_head and bool(cfg.entity.fact_token_ids)))
    model = CrossViewModel(
        cfg,
        view_encoder=ViewEncoder(cfg),
        entity_tokenizer=EntityTokenizer(cfg),
        entity_attention=EntityAttention(cfg) if cfg.entity.attention else None,
        fusion=FusionTransformer(cfg) if cfg.fusion.enabled else None,
        prefix=PrefixReader(cfg) if cfg.fusion.enabled else BagOfFramesPrefix(cfg),
        evidence=EvidenceHead(cfg.d_model),
        language_head=LanguageHead(lm, cfg.lm),
        token_proj=nn.Linear(cfg.lm_width, cfg.d_model) if needs_token_proj else None,
        summary=BagOfFramesPrefix(cfg) if cfg.fusion.enabled and cfg.fusion.summary_tokens else None,
    )
    if cfg.embed_std is not None:
        init_embeddings(model, cfg.embed_std)
    return model


def init_embeddings(model: nn.Module, std: float) -> None:
    """Re-initialise every additive nn.Embedding of the model (token type, question position,
    mark label and role; not the LM's, which has its own init) from N(0, std).

    PyTorch's default N(0, 1) gives these vectors a norm of about sqrt(d_model), an order of
    magnitude above the projected words and box features they are added to; GPT-2, BERT and
    timm's ViT initialise such embeddings at std 0.02."""
    lm = model.language_head.lm
    lm_modules = set(lm.modules())
    for module in model.modules():
        if isinstance(module, nn.Embedding) and module not in lm_modules:
            nn.init.normal_(module.weight, std=std)
