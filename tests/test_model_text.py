"""Prompt template, tokenizer and text collation (inputs/text.py)."""
import torch

from inputs.text import PromptTokenizer, build_tokenizer, collate_text, format_prompt
from model.config import CLIP_LABEL_TOKEN_IDS, ModelConfig


def test_prompt_template_snapshot():
    assert format_prompt(" How many people? ", ["2", "3", "None of the above"]) == (
        "Question: How many people? Options: (A) 2 (B) 3 (C) None of the above Answer:")


def test_encode_and_collate_mixed_option_counts():
    tok = PromptTokenizer()
    a = tok.encode("How many people?", ["1", "2", "3", "4"])
    b = tok.encode("Same person?", ["yes", "no", "the person marked 2", "maybe", "None of the above"])
    assert a["prompt_ids"].dtype == torch.long and len(a["option_ids"]) == 4
    batch = collate_text([a, b], tok.pad_id)
    assert batch["option_ids"].shape[:2] == (2, 5)
    assert batch["option_valid"].tolist() == [[True] * 4 + [False], [True] * 5]
    assert batch["prompt_mask"].sum(1).tolist() == [len(a["prompt_ids"]), len(b["prompt_ids"])]
    assert tok.vocab_size == ModelConfig().lm.vocab_size


def test_letter_scoring_and_label_ids():
    tok = PromptTokenizer(score_option="letter")
    enc = tok.encode("q", ["x", "y"])
    assert [ids.tolist() for ids in enc["option_ids"]] == [tok.ids("A"), tok.ids("B")]
    assert tok.label_token_ids(15) == CLIP_LABEL_TOKEN_IDS
    assert build_tokenizer(ModelConfig()).score_option == "text"
