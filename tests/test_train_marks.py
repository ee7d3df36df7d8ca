"""Mark roles: which marks the question and the options name, as a model input."""
import torch

from inputs.items import mark_role
from model import build_model, tiny_model_config
from model.dummy_batch import random_batch

QUESTION = "The person marked 1 also appears, with a different mark, in another image. Which mark?"


def test_mark_role_reads_whole_words_of_question_and_options():
    options = ["4", "2", "12", "3"]
    assert mark_role("1", QUESTION, options) == 1          # named by the question
    assert mark_role("4", QUESTION, options) == 2          # an option
    assert mark_role("12", QUESTION, options) == 2         # "12" is not "1", nor "1" "12"
    assert mark_role("11", QUESTION, options) == 0
    assert mark_role("2", "Is the person marked 2 near?", ["2", "5"]) == 3
    assert mark_role("1", "How many people can be seen in the frame labelled 1?", ["4", "5"]) == 1
    assert mark_role("", QUESTION, options) == 0
    assert mark_role("3", "What does the person marked 13 hold?", ["3 balls", "a cup"]) == 0


def test_mark_role_changes_the_entity_tokens_and_may_be_absent():
    torch.manual_seed(0)
    cfg = tiny_model_config()
    model = build_model(cfg).eval()
    batch = random_batch(cfg, views=[3, 2], frames=[1, 2], options=[4, 4], cameras=[True, True])
    with torch.no_grad():
        ref = model(batch)["option_logits"]
        flipped = dict(batch, mark_role=(batch["mark_role"] + 1) % 4)
        assert not torch.allclose(model(flipped)["option_logits"], ref)
        absent = {k: v for k, v in batch.items() if k != "mark_role"}
        zeros = dict(batch, mark_role=torch.zeros_like(batch["mark_role"]))
        torch.testing.assert_close(model(absent)["option_logits"], model(zeros)["option_logits"])
