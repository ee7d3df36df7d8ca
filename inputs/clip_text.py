"""The backbone's own text tower as an input: each option, as a caption, in CLIP's space.

With ``model.lm.clip_prior`` the model adds to each option's score the CLIP zero-shot
similarity between that option's caption ("{question} {option}", as the ``clip-zeroshot``
adapter scores it) and the pooled image embeddings of the views (the feature cache's
``pooled``, which for the shipped tower is CLIP's image embedding). The text side is computed
here, once per (question, options), by the frozen text tower of the backbone's open_clip
folder: the pipeline hands the model ``option_clip`` (O, E), L2-normalised and multiplied by
the tower's logit scale, so ``pooled . option_clip`` is the zero-shot logit.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import torch

CAPTION_TEMPLATE = "{question} {option}"  # the clip-zeroshot adapter's default template


def folder_tokenizer(folder: Path) -> Any:
    """The tokenizer an open_clip folder was trained with: the closed caption vocabulary named
    in its open_clip_config.json (the shipped tower; unknown words dropped), else open_clip's."""
    import open_clip

    from bench.synth.captions import CaptionTokenizer
    spec = json.loads((Path(folder) / "open_clip_config.json").read_text()).get("tokenizer")
    if not spec:
        return open_clip.get_tokenizer(f"local-dir:{folder}")
    if spec.get("class") != "bench.synth.captions.CaptionTokenizer":
        raise ValueError(f"{folder}/open_clip_config.json: unknown tokenizer class {spec.get('class')!r}")
    return CaptionTokenizer(spec["vocab"], spec["context_length"], drop_unknown=True)


class ClipTextEncoder:
    """Frozen text tower of an open_clip model: (question, options) -> (O, E) logits side.

    Args:
        model: the loaded open_clip CLIP (``inputs.backbone.build_components`` hands in the one
            whose image tower the feature cache uses); its text tower is frozen here.
        tokenizer: the tokenizer its text tower was trained with (``folder_tokenizer``).
    """

    def __init__(self, model: Any, tokenizer: Any):
        self.model = model.eval()
        self.model.requires_grad_(False)
        self.tokenizer = tokenizer
        self.scale = float(self.model.logit_scale.exp())
        self.dim = int(self.model.text_projection.shape[-1]) if hasattr(self.model, "text_projection") else None
        self._memo: dict[tuple, torch.Tensor] = {}

    @classmethod
    def from_loaded(cls, model: Any, folder: Path) -> "ClipTextEncoder":
        """The text side of a CLIP already loaded from the open_clip ``folder``."""
        return cls(model, folder_tokenizer(folder))

    @classmethod
    def from_pretrained(cls, pretrained: str | None) -> "ClipTextEncoder":
        """Load the text side alone from what ``model.backbone.pretrained`` names (resolved by
        ``inputs.backbone.locate_pretrained``); it must be a local open_clip folder."""
        from inputs.backbone import load_open_clip_folder, locate_pretrained
        source = locate_pretrained(pretrained)
        if not (isinstance(source, Path) and source.is_dir()):
            raise ValueError(f"model.lm.clip_prior needs model.backbone.pretrained to be a local open_clip "
                             f"folder with a text tower, got {pretrained!r}")
        return cls.from_loaded(load_open_clip_folder(source), source)

    def __call__(self, question: str, options: Sequence[str]) -> torch.Tensor:
        """(O, E) float: each option's caption embedding, L2-normalised, times the logit scale."""
        key = (question, tuple(options))
        if key not in self._memo:
            captions = [CAPTION_TEMPLATE.format(question=question.strip(), option=o) for o in options]
            with torch.inference_mode():
                text = self.model.encode_text(self.tokenizer(captions), normalize=True)
            self._memo[key] = (text.float() * self.scale).clone()
        return self._memo[key]
