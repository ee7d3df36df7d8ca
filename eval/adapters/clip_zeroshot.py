"""CLIP zero-shot: score each option's text against the query's images with open_clip.

``--model clip-zeroshot --model-arg arch=ViT-B-32 --model-arg pretrained=openai`` (a tag whose
weights are already in the local open_clip/HF cache, or a local checkpoint file), or
``--model-arg pretrained=checkpoints/backbone/synthclip-s16``: a local open_clip folder such as
the shipped in-domain tower, loaded strictly with its own tokenizer (a closed caption
vocabulary: words it does not know are dropped from the captions). Each option
becomes a caption (``template``, default "{question} {option}"); its score is the cosine
similarity to every frame of every view, averaged. It reads no camera and no view order: a
floor for "image-text matching without reasoning".

``pretrained=""`` builds the architecture with RANDOM weights (useful only as a plumbing test);
that is announced loudly at construction and written into every prediction's ``meta``
(``pretrained: false`` plus a warning), since report.md has no place for adapter warnings.
"""
from __future__ import annotations

import json
import sys
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.constants import LETTERS
from eval.adapters.base import ModelAdapter, Request, Response, throughput
from eval.adapters.hf_common import auto_device
from eval.adapters.registry import register_model

RANDOM_WARNING = ("clip-zeroshot: NO pretrained weights (pretrained=''): the CLIP backbone is randomly "
                  "initialised, so its scores carry no image-text meaning; use pretrained=TAG or a local file")


@register_model("clip-zeroshot")
class ClipZeroShot(ModelAdapter):
    """open_clip image-text similarity per option (mean over images); no generation."""

    @dataclass
    class Args:
        arch: str = "ViT-B-32"  # open_clip model name (python -c "import open_clip; print(open_clip.list_models())")
        pretrained: str = ""  # open_clip tag (cached locally), checkpoint file or local open_clip folder;
        #   "" = RANDOM weights
        model_config: str = ""  # optional JSON model config registered with open_clip; arch = its file stem
        template: str = "{question} {option}"  # caption per option; fields: question, option, letter
        init_seed: int = 0  # seeds random weights (pretrained="")
        device: str = throughput("auto")  # auto | cpu | cuda
        cache_size: int = throughput(65536)  # image and caption embeddings kept (least recently used
        #   dropped): the protocol asks about the same sample under several view settings, so most
        #   images and every caption recur; 0 turns the caches off

    def __init__(self, args=None):
        super().__init__(args)
        try:
            self.args.template.format(question="q", option="o", letter="A")
        except (KeyError, IndexError, ValueError) as err:
            raise ValueError(f"template={self.args.template!r}: {err!r}; fields are question, option, letter")
        self.pretrained = bool(self.args.pretrained)
        if self.args.cache_size < 0:
            raise ValueError(f"cache_size={self.args.cache_size}: must be >= 0 (0 turns the caches off)")
        if not self.pretrained:
            warnings.warn(RANDOM_WARNING, stacklevel=2)
            print(f"WARNING {RANDOM_WARNING}", file=sys.stderr)
        self._image_cache: OrderedDict = OrderedDict()  # resolved image path -> (d,) embedding
        self._text_cache: OrderedDict = OrderedDict()  # caption -> (d,) embedding
        self.n_encoded = {"images": 0, "captions": 0}  # what the towers actually ran on
        self._build()

    def _build(self) -> None:
        import open_clip
        import torch
        from inputs.backbone import load_open_clip_folder, locate_pretrained
        self.device = self.args.device
        if self.device == "auto":
            self.device = auto_device(torch.cuda.is_available())
        source = locate_pretrained(self.args.pretrained or None, key="--model-arg pretrained")
        if isinstance(source, Path) and source.is_dir():
            self._build_folder(source, load_open_clip_folder)
            return
        if self.args.model_config:
            if not Path(self.args.model_config).is_file():
                raise ValueError(f"model_config={self.args.model_config}: no such file")
            open_clip.add_model_config(self.args.model_config)
        if self.args.arch not in open_clip.list_models():
            raise ValueError(f"arch={self.args.arch!r} is not an open_clip model (see open_clip.list_models())")
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.args.init_seed)
                model, _, preprocess = open_clip.create_model_and_transforms(
                    self.args.arch, pretrained=self.args.pretrained or None, load_weights=self.pretrained,
                    device=self.device)
        except Exception as err:  # offline cache miss, bad file: one line for the user, not a traceback
            raise ValueError(f"cannot build open_clip {self.args.arch} with pretrained={self.args.pretrained!r}: "
                             f"{type(err).__name__}: {err}") from None
        self.model = model.eval()
        self.preprocess = preprocess
        self.tokenizer = open_clip.get_tokenizer(self.args.arch)

    def _build_folder(self, folder: Path, load) -> None:
        """A local open_clip folder; its config may name the caption tokenizer it was trained with."""

        from open_clip.transform import PreprocessCfg, image_transform_v2

        try:
            model = load(folder).to(self.device)
        except Exception as err:
            raise ValueError(f"cannot load the open_clip folder {folder}: {type(err).__name__}: {err}") from None
        config = json.loads((folder / "open_clip_config.json").read_text())
        self.tokenizer = folder_tokenizer(folder)
        pp = PreprocessCfg(**{k: v for k, v in config.get("preprocess_cfg", {}).items()
                              if k in PreprocessCfg.__dataclass_fields__})
        self.preprocess = image_transform_v2(pp, is_train=False)
        self.model = model.eval()

    def _captions(self, request: Request) -> list[str]:
        q = request.sample.question.strip()
        return [self.args.template.format(question=q, option=opt, letter=LETTERS[i])
                for i, opt in enumerate(request.options)]

    def generate(self, requests: list[Request]) -> list[Response]:
        from PIL import Image
        meta = {"pretrained": self.pretrained, "arch": self.args.arch, "score": "mean_cosine_over_images"}
        if not self.pretrained:
            meta["warning"] = RANDOM_WARNING
        out = []
        for r in requests:
            if not r.image_paths:  # a text-only request (fallback extraction): CLIP cannot answer
                out.append(Response(text="", meta={**meta, "error": "no images"}))
                continue
            img = self._embed([str(Path(p).resolve()) for p in r.image_paths], self._image_cache, "images",
                              lambda keys: self._encode_images(keys, Image))  # (n_img, d)
            txt = self._embed(self._captions(r), self._text_cache, "captions", self._encode_captions)  # (n_opt, d)
            sims = img @ txt.T  # (n_img, n_options) cosine similarities
            out.append(Response(scores=sims.mean(0).float().cpu().tolist(), meta=dict(meta)))
        return out

    def _encode_images(self, paths: list[str], Image):
        import torch
        images = []
        for p in paths:
            with Image.open(p) as im:
                images.append(self.preprocess(im.convert("RGB")))
        with torch.inference_mode():
            return self.model.encode_image(torch.stack(images).to(self.device), normalize=True).float().cpu()

    def _encode_captions(self, captions: list[str]):
        import torch
        with torch.inference_mode():
            return self.model.encode_text(self.tokenizer(captions).to(self.device), normalize=True).float().cpu()

    def _embed(self, keys: list[str], cache: OrderedDict, what: str, encode):
        """(len(keys), d) embeddings; the keys not in ``cache`` are encoded in one batch. Each row
        is encoded alone or in a batch of misses: the same up to float rounding."""
        import torch
        missing = list(dict.fromkeys(k for k in keys if k not in cache))
        fresh = dict(zip(missing, encode(missing))) if missing else {}
        self.n_encoded[what] += len(missing)
        rows = []
        for k in keys:
            if k in fresh:
                rows.append(fresh[k])
            else:
                cache.move_to_end(k)
                rows.append(cache[k])
        if self.args.cache_size:
            for k, v in fresh.items():
                cache[k] = v
            while len(cache) > self.args.cache_size:
                cache.popitem(last=False)
        return torch.stack(rows)


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
