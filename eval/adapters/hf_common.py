"""Shared machinery of the Hugging Face multi-image MLLM adapters (Qwen2-VL, LLaVA-OneVision,
InternVL): local weights, the model's own chat template, a resolution policy, greedy batched
decoding with left padding, and per-query image-token accounting in ``Response.meta``.

A concrete adapter is a subclass with a ``@register_model`` name and, where its processor
needs it, two small hooks (``size_multiple``, ``processor_kwargs``). Nothing here is
registered itself. torch/transformers are imported lazily: the registry imports every
adapter module, and ``--model random`` must not pay for loading transformers.
"""
from __future__ import annotations

import copy
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.prompt import IMAGE_TOKEN
from common.provenance import file_sha256
from eval.adapters.base import ModelAdapter, Request, Response, throughput
from eval.adapters.resolution import ResolutionPolicy, load_frames


def auto_device(cuda_available: bool, env: dict[str, str] | None = None) -> str:
    """The device ``device=auto`` means: cuda:LOCAL_RANK under torchrun / accelerate launch
    (one GPU per process), cuda on a single-process GPU machine, else cpu."""
    if not cuda_available:
        return "cpu"
    env = os.environ if env is None else env
    local_rank = env.get("LOCAL_RANK")
    return f"cuda:{int(local_rank)}" if local_rank and local_rank.isdigit() else "cuda"


def weights_fingerprint(path: str | Path) -> dict:
    """SHA-256 of a local model folder's config.json and weights index (or, for a single weights
    file, of its name and size): which weights answered, without reading gigabytes."""
    folder = Path(path)
    out: dict[str, Any] = {}
    for name in ("config.json", "model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / name).is_file():
            out[name] = file_sha256(folder / name)
    files = sorted(p for p in folder.glob("*") if p.suffix in (".safetensors", ".bin", ".gguf"))
    if files:
        listing = "\n".join(f"{p.name}\t{p.stat().st_size}" for p in files)
        out["weight_files"] = hashlib.sha256(listing.encode()).hexdigest()
    return out


def chat_messages(prompt: str) -> list[dict]:
    """One user turn: the unified prompt split on ``<image>``, one image entry per placeholder."""
    content: list[dict] = []
    for i, piece in enumerate(prompt.split(IMAGE_TOKEN)):
        if i > 0:
            content.append({"type": "image"})
        if piece:
            content.append({"type": "text", "text": piece})
    return [{"role": "user", "content": content}]


def token_runs(ids: list[int], token_id: int) -> list[int]:
    """Lengths of the maximal runs of ``token_id`` in ``ids``: one run per image in our prompts,
    because the unified prompt never puts two images next to each other without text."""
    runs, current = [], 0
    for t in ids:
        if t == token_id:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    if current:
        runs.append(current)
    return runs


def per_view_tokens(request: Request, runs: list[int]) -> list[int] | None:
    """Image tokens per view (frames of a view summed); None when runs do not map to frames."""
    frames_per_view = [len(v.image_paths) for v in request.views]
    if len(runs) != sum(frames_per_view):
        return None
    out, i = [], 0
    for n in frames_per_view:
        out.append(sum(runs[i:i + n]))
        i += n
    return out


class HFVisionLanguageAdapter(ModelAdapter):
    """Base of the transformers image-text-to-text adapters (not registered itself)."""

    @dataclass
    class Args:
        path: str = ""  # local folder with config.json, weights, processor and chat template
        resolution: str = "native"  # native | fixed:WxH | budget:PIXELS (see eval/adapters/resolution.py)
        max_new_tokens: int = 32  # greedy decoding stops here or at end of turn
        max_batch: int = throughput(0)  # queries per forward pass; 0 = the evaluator's --batch-size
        device: str = throughput("auto")  # auto (cuda:LOCAL_RANK under torchrun, else cuda when available) | cpu | cuda | cuda:N
        device_map: str = throughput("")  # "auto": spread a model too large for one GPU over all visible GPUs (accelerate)
        dtype: str = "auto"  # auto (bfloat16 on GPU, float32 on CPU) | float32 | bfloat16 | float16
        attn_implementation: str = throughput("")  # "" = transformers' default; e.g. sdpa, flash_attention_2

    trust_remote_code = False  # only InternVL may turn this on, through its own Args

    def __init__(self, args=None):
        super().__init__(args)
        # Check arguments now (a bad command line fails before OUT is touched), load weights
        # lazily in prepare(): a finished run that is re-run never loads the model.
        if not self.args.path:
            raise ValueError(f"{self.name or type(self).__name__} needs --model-arg path=DIR (a local model folder)")
        if not (Path(self.args.path) / "config.json").is_file():
            raise ValueError(f"path={self.args.path}: no config.json there (expected a local model folder)")
        self.policy = ResolutionPolicy.parse(self.args.resolution)
        if self.args.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"dtype={self.args.dtype!r}: expected auto, float32, bfloat16 or float16")
        if self.args.max_batch < 0 or self.args.max_new_tokens < 1:
            raise ValueError("max_batch must be >= 0 and max_new_tokens >= 1")
        self.model = None
        self.processor = None

    # ---- hooks for subclasses -------------------------------------------------------------
    def size_multiple(self) -> int:
        """Round resized frames to this multiple so the processor keeps them as they are."""
        return 1

    def processor_kwargs(self, sizes: list[tuple[int, int]]) -> dict[str, Any]:
        """Extra keyword arguments of the processor call for frames of ``sizes``."""
        return {}

    def processed_sizes(self, inputs: Any) -> list[list[int]] | None:
        """(width, height) per frame as the vision tower saw it, when the processor tells."""
        return None

    # ---- loading --------------------------------------------------------------------------
    def _device_and_dtype(self):
        import torch
        device = self.args.device
        if device == "auto":
            device = auto_device(torch.cuda.is_available())
        dtype = self.args.dtype
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
        return device, getattr(torch, dtype)

    def load(self) -> None:
        """Processor and model from ``path``, offline (local files only)."""
        from transformers import AutoModelForImageTextToText, AutoProcessor
        device, dtype = self._device_and_dtype()
        common = dict(local_files_only=True, trust_remote_code=self.trust_remote_code)
        self.processor = AutoProcessor.from_pretrained(self.args.path, **common)
        extra = {"attn_implementation": self.args.attn_implementation} if self.args.attn_implementation else {}
        if self.args.device_map:  # model parallel: accelerate places the layers over the visible GPUs
            extra["device_map"] = self.args.device_map
        self.model = AutoModelForImageTextToText.from_pretrained(self.args.path, dtype=dtype, **common, **extra)
        if not self.args.device_map:
            self.model.to(device)
        self.model.eval()
        self._setup_tokenizer()

    def _setup_tokenizer(self) -> None:
        tok = self.processor.tokenizer
        tok.padding_side = "left"  # decoder-only batching: prompts end where generation starts
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token

    def prepare(self, benchmark) -> None:
        if self.model is None:
            self.load()

    def provenance(self) -> dict:
        device = None
        if self.model is not None:
            devices = sorted({str(d) for d in getattr(self.model, "hf_device_map", {}).values()})
            device = ",".join(devices) if devices else str(self.model.device)
        return {"device": device or self.args.device, "weights": weights_fingerprint(self.args.path),
                "dtype": str(getattr(self.model, "dtype", self.args.dtype)).removeprefix("torch.")}

    # ---- answering ------------------------------------------------------------------------
    def generate(self, requests: list[Request]) -> list[Response]:
        if self.model is None:
            self.load()
        step = self.args.max_batch or len(requests) or 1
        out: list[Response] = []
        for i in range(0, len(requests), step):
            out += self._generate_batch(requests[i:i + step])
        return out

    def _generation_config(self):
        gen = copy.deepcopy(self.model.generation_config)
        # Greedy: clear sampling knobs a checkpoint may ship, so generate() does not warn or sample.
        gen.do_sample, gen.num_beams = False, 1
        gen.temperature = gen.top_p = gen.top_k = None
        gen.max_new_tokens = self.args.max_new_tokens
        gen.pad_token_id = self.processor.tokenizer.pad_token_id
        return gen

    def _generate_batch(self, requests: list[Request]) -> list[Response]:
        import torch
        texts, images, sizes = [], [], []
        for r in requests:
            frames, frame_sizes = load_frames(r, self.policy, self.size_multiple())
            texts.append(self.processor.apply_chat_template(chat_messages(r.prompt), add_generation_prompt=True,
                                                            tokenize=False))
            images.append(frames)
            sizes.append(frame_sizes)
        kwargs = dict(text=texts, padding=True, return_tensors="pt")
        if any(images):
            # Nested per query: processors that count images per sample (LLaVA-OneVision's
            # multi-image mode) need to know which images belong together.
            kwargs["images"] = images
            kwargs.update(self.processor_kwargs([s for per in sizes for s in per]))
        inputs = self.processor(**kwargs)
        inputs = inputs.to(self.model.device, dtype=self.model.dtype)  # casts floating tensors only
        with torch.inference_mode():
            generated = self.model.generate(**inputs, generation_config=self._generation_config())
        n_prompt = inputs["input_ids"].shape[1]
        new = generated[:, n_prompt:]
        answers = self.processor.batch_decode(new, skip_special_tokens=True)
        processed = self.processed_sizes(inputs)
        responses, start = [], 0
        for row, (r, text, frame_sizes) in enumerate(zip(requests, answers, sizes)):
            ids = inputs["input_ids"][row][inputs["attention_mask"][row].bool()].tolist()
            runs = token_runs(ids, self.image_token_id())
            meta = {
                "resolution": str(self.policy),
                "image_sizes": [list(s) for s in frame_sizes],
                "image_tokens": sum(runs),
                "image_tokens_per_view": per_view_tokens(r, runs),
                "prompt_tokens": len(ids),
                "new_tokens": int((new[row] != self.processor.tokenizer.pad_token_id).sum()),
            }
            if processed is not None:
                meta["processed_sizes"] = processed[start:start + len(frame_sizes)]
            start += len(frame_sizes)
            responses.append(Response(text=text.strip(), meta=meta))
        return responses

    def image_token_id(self) -> int:
        """Id of the placeholder token the processor repeats once per vision feature."""
        token_id = getattr(self.processor, "image_token_id", None)
        if token_id is None:
            print(f"warning: {self.name}: processor has no image_token_id; image tokens are not counted",
                  file=sys.stderr)
            return -1
        return token_id
