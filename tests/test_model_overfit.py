"""A tiny model memorises 16 samples: gradients reach the option scores through every part.

A step budget, not a wall clock: the test must not depend on how loaded the machine is."""
import torch

from model import build_model, tiny_model_config
from model.dummy_batch import random_batch


MAX_STEPS = 200  # seed 0 needs 26 steps: an 8x margin that does not depend on machine load


def test_tiny_model_overfits_16_samples_within_a_step_budget():
    torch.manual_seed(0)
    cfg = tiny_model_config()
    model = build_model(cfg).train()
    n = 16
    batch = random_batch(cfg, views=[2, 3, 4, 1] * 4, frames=[1, 2, 1, 3] * 4,
                         options=[4, 5] * 8, cameras=[True, False] * 8, seed=1)
    # Same question and option texts everywhere: only the views can tell the samples apart.
    for key in ("prompt_ids", "prompt_mask"):
        batch[key] = batch[key][:1].expand_as(batch[key]).clone()
    batch["option_ids"][:] = torch.arange(1, 6).view(1, 5, 1)
    batch["option_mask"][:] = False
    batch["option_mask"][..., 0] = batch["option_valid"]
    n_options = batch["option_valid"].sum(1)
    answer = (torch.arange(n) * 7 + 3) % n_options  # answers spread over the letters
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # the trainer's default
    accuracy, step = 0.0, 0
    while step < MAX_STEPS and accuracy < 1.0:
        out = model(batch)
        loss = torch.nn.functional.cross_entropy(out["option_logits"], answer)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        if (out["option_logits"].argmax(-1) == answer).all():
            # Train mode (dropout) can be right by luck: stop only when eval mode is too.
            model.eval()
            with torch.no_grad():
                accuracy = (model(batch)["option_logits"].argmax(-1) == answer).float().mean().item()
            model.train()
    model.eval()
    with torch.no_grad():
        accuracy = (model(batch)["option_logits"].argmax(-1) == answer).float().mean().item()
    assert accuracy == 1.0, f"accuracy {accuracy} after {step} steps"
    print(f"overfit in {step} steps")
