"""CrossViewModel.forward against outputs stored from an earlier version of the code.

tests/data/crossview_forward_reference.pt holds, for a few tiny configs (each config stored
in full, so later changes of the dataclass defaults do not move it), the outputs of the model
built with ``torch.manual_seed(0)`` on ``random_batch(cfg, **BATCH)`` in eval mode. A
refactoring of the forward pass must reproduce them to 1e-4: the same code differs by up to
~3e-5 between CPU models (their float kernels sum in other orders), a change of function by
orders of magnitude more.

Rewrite the file only when the model's function is meant to change:
    python tests/test_model_forward_reference.py
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

from common.config import from_dict, to_dict
from model import ModelConfig, build_model
from model.dummy_batch import random_batch

REFERENCE = Path(__file__).parent / "data" / "crossview_forward_reference.pt"
BATCH = dict(views=[1, 3, 2], frames=[1, 2, 3], options=[4, 5, 5], cameras=[True, False, True], marks=2)


def _cases() -> dict[str, ModelConfig]:
    """The configs stored when the reference was written (with the code of that time)."""
    from model import tiny_model_config

    def with_(cfg, section, **changes):
        return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **changes)})

    tiny = tiny_model_config()
    return {
        "tiny": tiny,
        "summary_tokens": with_(tiny, "fusion", summary_tokens=True),
        "no_camera": with_(tiny, "camera", enabled=False),
        "no_entity_attention": with_(tiny, "entity", attention=False),
        "no_fusion": with_(tiny, "fusion", enabled=False),
        "no_gating": with_(tiny, "evidence", gating=False),
        "bag_of_frames": with_(with_(with_(tiny, "camera", enabled=False), "entity", attention=False),
                               "fusion", enabled=False),
        "projected": with_(with_(tiny, "entity", project=True), "fusion", summary_tokens=True),
        "projected_no_attention": with_(tiny, "entity", project=True, attention=False),
        "no_label_ids_no_roles": with_(tiny, "entity", label_token_ids=None, mark_roles=False),
        "prefix_after_prompt_off": with_(tiny, "lm", prefix_after_prompt=False, option_match=False),
    }


def _outputs(cfg: ModelConfig) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    with torch.no_grad():
        return model(random_batch(cfg, **BATCH))


def _stored() -> dict:
    return torch.load(REFERENCE, map_location="cpu", weights_only=True)


@pytest.mark.parametrize("name", sorted(_stored()) if REFERENCE.is_file() else [])
def test_forward_reproduces_the_stored_outputs(name):
    stored = _stored()[name]
    cfg = from_dict(ModelConfig, stored["config"])
    out = _outputs(cfg)
    assert sorted(out) == sorted(stored["outputs"])
    for key, ref in stored["outputs"].items():
        assert out[key].dtype == ref.dtype and out[key].shape == ref.shape, key
        torch.testing.assert_close(out[key], ref, rtol=0, atol=1e-4, msg=lambda m, k=key: f"{name}: {k}: {m}")


def write_reference() -> None:
    cases = {name: {"config": to_dict(cfg), "outputs": _outputs(cfg)} for name, cfg in _cases().items()}
    REFERENCE.parent.mkdir(exist_ok=True)
    torch.save(cases, REFERENCE)
    print(f"wrote {REFERENCE} ({REFERENCE.stat().st_size} bytes, {len(cases)} configs)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    write_reference()
