"""Any OpenAI-compatible chat-completions endpoint: hosted GPT, Gemini's OpenAI-compatible
API, or a local vLLM / SGLang server.

    export OPENAI_API_KEY=...        # never on the command line: only the variable's *name* is an arg
    python -m eval run --bench DIR --model openai --out runs/gpt \
        --model-arg base_url=https://api.openai.com/v1 --model-arg model=gpt-4o-2024-08-06

Images travel as base64 data URLs, interleaved with the prompt's text where its ``<image>``
placeholders stand. Temperature 0. Requests of one evaluator batch run on a thread pool
(``concurrency``); 429, 5xx, timeouts and connection errors are retried with exponential
backoff (honouring Retry-After). When retries run out the run stops with an error, and the
batches already answered stay in predictions.jsonl: re-running the same command sends only
the unanswered queries. A 4xx that retrying cannot fix (say a refused image) is recorded as an
empty answer with ``meta.error``; 401/403/404 stop the run (a wrong key or URL is run-wide).
Standard library only (urllib).
"""
from __future__ import annotations

import base64
import http.client
import io
import json
import os
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from eval.adapters.base import ModelAdapter, Request, Response
from eval.adapters.registry import register_model
from eval.adapters.resolution import ResolutionPolicy, load_frames
from eval.prompt import IMAGE_TOKEN

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
FATAL_STATUS = {401, 403, 404}
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp"}


class EndpointError(RuntimeError):
    """The endpoint cannot answer (retries exhausted, or a run-wide 401/403/404)."""


def image_data_url(path: Path) -> str:
    """The file's bytes as a data URL (no re-encoding, so the model sees the stored pixels)."""
    mime = MIME.get(path.suffix.lower(), "image/png")
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def pil_data_url(image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return f"data:image/png;base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


@register_model("openai")
class OpenAICompatible(ModelAdapter):
    """OpenAI-compatible chat completions (GPT, Gemini, vLLM, SGLang) over HTTP, temperature 0."""

    @dataclass
    class Args:
        base_url: str = "https://api.openai.com/v1"  # ".../v1"; /chat/completions is appended
        model: str = ""  # the endpoint's model name, e.g. gpt-4o-2024-08-06
        api_key_env: str = "OPENAI_API_KEY"  # NAME of the variable holding the key; "" = send no key
        max_tokens: int = 64  # completion budget per query
        max_tokens_field: str = "max_tokens"  # some models want max_completion_tokens
        timeout: float = 120.0  # seconds per HTTP attempt
        retries: int = 6  # extra attempts on 429 / 5xx / timeouts / connection errors
        backoff: float = 1.0  # first wait in seconds; doubles each retry (capped at 60 s)
        concurrency: int = 4  # requests in flight at once
        resolution: str = "native"  # native sends the stored files; fixed:WxH / budget:PIXELS re-encode PNGs
        image_detail: str = ""  # OpenAI's image "detail" (low/high/auto); "" = omit

    def __init__(self, args=None):
        super().__init__(args)
        if not self.args.model:
            raise ValueError("openai needs --model-arg model=NAME (the endpoint's model name)")
        if not self.args.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url={self.args.base_url!r}: expected an http(s) URL")
        if self.args.api_key_env and not os.environ.get(self.args.api_key_env):
            # Name the variable, never print its (absent) value.
            raise ValueError(f"environment variable {self.args.api_key_env} is not set (api_key_env); "
                             "export it, or pass api_key_env= for an endpoint without a key")
        if self.args.concurrency < 1 or self.args.retries < 0 or self.args.max_tokens < 1:
            raise ValueError("concurrency and max_tokens must be >= 1, retries >= 0")
        self.policy = ResolutionPolicy.parse(self.args.resolution)
        self.url = self.args.base_url.rstrip("/") + "/chat/completions"

    # ---- request building -----------------------------------------------------------------
    def _image_urls(self, request: Request) -> tuple[list[str], list[list[int]] | None]:
        if self.policy.kind == "native":
            return [image_data_url(p) for p in request.image_paths], None
        frames, sizes = load_frames(request, self.policy)
        return [pil_data_url(f) for f in frames], [list(s) for s in sizes]

    def payload(self, request: Request) -> tuple[dict, list[list[int]] | None]:
        """The JSON body of one query and the frame sizes sent (None = as stored)."""
        urls, sizes = self._image_urls(request)
        content: list[dict] = []
        for i, piece in enumerate(request.prompt.split(IMAGE_TOKEN)):
            if i > 0:
                image = {"url": urls[i - 1]}
                if self.args.image_detail:
                    image["detail"] = self.args.image_detail
                content.append({"type": "image_url", "image_url": image})
            if piece:
                content.append({"type": "text", "text": piece})
        body = {"model": self.args.model, "messages": [{"role": "user", "content": content}],
                "temperature": 0, self.args.max_tokens_field: self.args.max_tokens}
        return body, sizes

    # ---- HTTP -----------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.args.api_key_env:
            headers["Authorization"] = "Bearer " + os.environ.get(self.args.api_key_env, "")
        return headers

    def _post(self, body: dict) -> tuple[dict | None, str | None, int]:
        """(response JSON, None, attempts) or (None, per-query error, attempts); raises EndpointError."""
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.args.retries + 1):
            wait = min(60.0, self.args.backoff * 2 ** attempt)
            req = urllib.request.Request(self.url, data=data, headers=self._headers(), method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.args.timeout) as resp:
                    return json.loads(resp.read().decode("utf-8")), None, attempt + 1
            except urllib.error.HTTPError as err:
                detail = err.read()[:300].decode("utf-8", "replace")
                last = f"HTTP {err.code} from {self.url}: {detail}"
                if err.code in FATAL_STATUS:
                    raise EndpointError(last) from None
                if err.code not in RETRY_STATUS:
                    return None, last, attempt + 1
                retry_after = err.headers.get("Retry-After") if err.headers else None
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    wait = min(60.0, max(wait, float(retry_after)))
            except (urllib.error.URLError, http.client.HTTPException, socket.timeout, ConnectionError,
                    json.JSONDecodeError) as err:  # dropped connections, half replies: worth retrying
                last = f"{type(err).__name__} from {self.url}: {getattr(err, 'reason', err)}"
            if attempt < self.args.retries:
                time.sleep(wait)
        raise EndpointError(f"gave up after {self.args.retries + 1} attempts: {last}")

    def _answer(self, request: Request) -> Response:
        body, sizes = self.payload(request)
        t0 = time.monotonic()
        reply, error, attempts = self._post(body)
        meta: dict = {"attempts": attempts, "seconds": round(time.monotonic() - t0, 3),
                      "resolution": str(self.policy)}
        if sizes is not None:
            meta["image_sizes"] = sizes
        if error is not None:
            meta["error"] = error
            return Response(text="", meta=meta)
        try:
            choice = reply["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            meta["error"] = f"unexpected reply shape: {json.dumps(reply)[:300]}"
            return Response(text="", meta=meta)
        meta["finish_reason"] = choice.get("finish_reason")
        if isinstance(reply.get("usage"), dict):
            meta["usage"] = {k: v for k, v in reply["usage"].items() if isinstance(v, int)}
        if reply.get("model"):
            meta["served_model"] = reply["model"]
        return Response(text=text if isinstance(text, str) else json.dumps(text), meta=meta)

    def generate(self, requests: list[Request]) -> list[Response]:
        if len(requests) == 1 or self.args.concurrency == 1:
            return [self._answer(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.args.concurrency, len(requests))) as pool:
            return list(pool.map(self._answer, requests))  # map keeps request order


@register_model("openai_compat")
class OpenAICompatibleAlias(OpenAICompatible):
    """Same as ``openai`` (OpenAI-compatible endpoint: vLLM, SGLang, Gemini)."""
