"""Tiny random-initialised MLLM folders for the adapter tests: the real transformers model and
processor classes with a few-kilobyte config, a byte-level BPE tokenizer trained in
milliseconds, and a minimal chat template in each family's format. Nothing is downloaded."""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

CORPUS = ["Question: How many people are in the scene? Options: A. 1 B. 2 C. 3 D. None of the above",
          "Answer with the option's letter from the given choices directly. View 1 View 2 frames"]
TINY_TEXT = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                 num_key_value_heads=1)


def build_tokenizer(specials: list[str], extra: dict[str, str] | None = None) -> PreTrainedTokenizerFast:
    """A 300-token byte-level BPE with ``specials`` (first is pad, third is end of turn)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 3, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=specials[0], eos_token=specials[2],
                                   extra_special_tokens=extra or {})


def chat_template(image_text: str) -> str:
    """ChatML turns; an image entry becomes ``image_text`` (each family's own placeholder)."""
    return ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
            "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}" + image_text +
            "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _save(model, processor, tok, out: Path) -> Path:
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _text_config(tok, **extra) -> dict:
    return dict(model_type="qwen2", vocab_size=len(tok), eos_token_id=tok.eos_token_id, bos_token_id=None,
                pad_token_id=tok.pad_token_id, **TINY_TEXT, **extra)


def make_tiny_qwen2_vl(out: Path) -> Path:
    """A ~0.1 M-parameter Qwen2VLForConditionalGeneration folder (patch 14, merge 2)."""
    from transformers import (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor,
                              Qwen2VLProcessor, Qwen2VLVideoProcessor)
    torch.manual_seed(0)
    tok = build_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                           "<|image_pad|>", "<|video_pad|>"])
    ids = tok.convert_tokens_to_ids
    text = _text_config(tok, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "mrope_section": [4, 2, 2]})  # sums to head_dim / 2
    text.pop("model_type")
    cfg = Qwen2VLConfig(text_config=text,
                        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2,
                                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2),
                        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
                        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"))
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), video_processor=Qwen2VLVideoProcessor(),
                                 tokenizer=tok, chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>"))
    return _save(Qwen2VLForConditionalGeneration(cfg), processor, tok, Path(out))


def make_tiny_llava_onevision(out: Path) -> Path:
    """A tiny LlavaOnevisionForConditionalGeneration: SigLIP tower on 28-px crops, 4 tokens per crop."""
    from transformers import (LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration,
                              LlavaOnevisionImageProcessor, LlavaOnevisionProcessor, LlavaOnevisionVideoProcessor)
    torch.manual_seed(0)
    tok = build_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>"])
    pinpoints = [[28, 28], [28, 56], [56, 28], [56, 56]]
    cfg = LlavaOnevisionConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64,
                           num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14),
        text_config=_text_config(tok), image_token_id=tok.convert_tokens_to_ids("<image>"),
        video_token_id=tok.convert_tokens_to_ids("<video>"), image_grid_pinpoints=pinpoints,
        vision_feature_select_strategy="full", vision_feature_layer=-1)
    image_processor = LlavaOnevisionImageProcessor(size={"height": 28, "width": 28}, image_grid_pinpoints=pinpoints,
                                                   crop_size={"height": 28, "width": 28})
    processor = LlavaOnevisionProcessor(image_processor=image_processor, video_processor=LlavaOnevisionVideoProcessor(),
                                        tokenizer=tok, num_image_tokens=4, vision_feature_select_strategy="full",
                                        chat_template=chat_template("<image>"))
    return _save(LlavaOnevisionForConditionalGeneration(cfg), processor, tok, Path(out))


def make_tiny_internvl(out: Path) -> Path:
    """A tiny native InternVLForConditionalGeneration: 56-px tiles, pixel shuffle 0.5 -> 4 tokens per tile."""
    from transformers import (GotOcr2ImageProcessor, InternVLConfig, InternVLForConditionalGeneration,
                              InternVLProcessor, InternVLVideoProcessor)
    torch.manual_seed(0)
    tok = build_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>"],
                          extra={"start_image_token": "<img>", "end_image_token": "</img>",
                                 "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"})
    cfg = InternVLConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=[56, 56], patch_size=[14, 14]),
        text_config=_text_config(tok), image_token_id=tok.context_image_token_id, downsample_ratio=0.5,
        vision_feature_layer=-1)
    processor = InternVLProcessor(image_processor=GotOcr2ImageProcessor(size={"height": 56, "width": 56}, max_patches=4),
                                  video_processor=InternVLVideoProcessor(), tokenizer=tok, image_seq_length=4,
                                  chat_template=chat_template("<IMG_CONTEXT>"))
    return _save(InternVLForConditionalGeneration(cfg), processor, tok, Path(out))
