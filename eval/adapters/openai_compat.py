"""Any OpenAI-compatible chat-completions endpoint: hosted GPT, Gemini's OpenAI-compatible
API, or a local vLLM / SGLang server.

    export OPENAI_API_KEY=...        # never on the command line: only the variable's *name* is an arg
    python -m eval run --bench DIR --model openai --out runs/gpt \
        --model-arg base_url=https://api.openai.com/v1 --model-arg model=gpt-4o-2024-08-06

Images travel as base64 data URLs, interleaved with the prompt's text where its ``<image>``
placeholders stand. Temperature 0. Requests run on one run-wide pool of ``concurrency``
workers, each with its own kept-alive connection (eval/adapters/http_client.py), so
``concurrency`` requests stay in flight whatever the evaluator's ``--batch-size``, and each
answer is handed back (and written) as soon as it arrives.

What each reply means:
- 2xx: the answer.
- 408/409/425/429/5xx, timeouts, dropped connections, half replies: retried with exponential
  backoff, honouring Retry-After (seconds or an HTTP date). When retries run out the run
  stops with an error; answers already written stay in predictions.jsonl and a rerun of the
  same command sends only the unanswered queries.
- 400/413/422 whose error names a reason of this one query (context length, content policy,
  an image it refuses): a per-query refusal, recorded as an empty answer with ``meta.error``.
- any redirect and any other 4xx (401/403/404/405, an unexplained 400): run-wide; the run
  stops at once. Redirects are never followed, so the key only goes to ``base_url``'s origin.
Every error text is stripped of the key and of anything that looks like a token before it is
printed or stored.
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from bench.prompt import IMAGE_TOKEN
from eval.adapters.base import ModelAdapter, Request, Response, throughput
from eval.adapters.http_client import KeepAliveClient, origin, one_line, redact, retry_after_seconds
from eval.adapters.registry import register_model
from eval.adapters.resolution import ResolutionPolicy, load_frames
from eval.errors import RunError

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
REFUSAL_STATUS = {400, 413, 422}  # per-query only when the error text names a per-query reason
REFUSAL_REASON = re.compile(
    r"(?i)context[ _-]?length|maximum context|too (?:long|large|many)|token limit|content[ _-]?(?:policy|filter|"
    r"management)|safety|moderation|invalid[ _-]?image|image[ _-]?(?:parse|format|size|too)|unsupported image|"
    r"payload too large")


def pause(seconds: float) -> None:
    """Wait between retries; named so a test can record the waits without patching time.sleep,
    which other threads (the thread pool, a test's fake server) share."""
    time.sleep(seconds)


MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp"}


class EndpointError(RunError):
    """The endpoint cannot answer: retries exhausted, a redirect, or a run-wide 4xx."""


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
        timeout: float = throughput(120.0)  # seconds per HTTP attempt
        retries: int = throughput(6)  # extra attempts on 429 / 5xx / timeouts / connection errors
        backoff: float = throughput(1.0)  # first wait in seconds; doubles each retry (capped at 60 s)
        concurrency: int = throughput(4)  # requests in flight at once, run-wide (independent of --batch-size)
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
        self.client = KeepAliveClient(self.url, self.args.timeout)
        self._pool: ThreadPoolExecutor | None = None
        self._served: set[str] = set()  # model names the endpoint says answered (provenance)

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
    def _key(self) -> str:
        return os.environ.get(self.args.api_key_env, "") if self.args.api_key_env else ""

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.args.api_key_env:
            headers["Authorization"] = "Bearer " + self._key()
        return headers

    def _clean(self, text: str) -> str:
        """An error text safe to print and store: no key, no token, one line."""
        return one_line(redact(text, [self._key()]))

    def _error_text(self, status: int, body: bytes) -> str:
        detail = redact(body[:4096].decode("utf-8", "replace"), [self._key()])
        return self._clean(f"HTTP {status} from {self.url}: {detail}")

    def _post(self, body: dict) -> tuple[dict | None, str | None, int]:
        """(response JSON, None, attempts) or (None, per-query refusal, attempts); raises EndpointError."""
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.args.retries + 1):
            wait = min(60.0, self.args.backoff * 2 ** attempt)
            try:
                reply = self.client.post(data, self._headers())
            except KeepAliveClient.RETRYABLE as err:  # dropped connections, timeouts: worth retrying
                last = self._clean(f"{type(err).__name__} from {self.url}: {err}")
                reply = None
            if reply is not None:
                status = reply.status
                if 200 <= status < 300:
                    try:
                        return json.loads(reply.body.decode("utf-8")), None, attempt + 1
                    except (UnicodeDecodeError, json.JSONDecodeError) as err:  # a half reply
                        last = self._clean(f"unreadable reply from {self.url}: {err}")
                elif 300 <= status < 400:
                    target = origin(reply.headers.get("location", "")) or "an unnamed place"
                    raise EndpointError(self._clean(
                        f"HTTP {status} redirect from {self.url} to {target} refused (the key is only sent to "
                        f"base_url); set base_url to the address that answers"))
                elif status in RETRY_STATUS:
                    last = self._error_text(status, reply.body)
                    after = retry_after_seconds(reply.headers.get("retry-after"))
                    if after is not None:
                        wait = min(60.0, max(wait, after))
                else:
                    text = self._error_text(status, reply.body)
                    if status in REFUSAL_STATUS and REFUSAL_REASON.search(text):
                        return None, text, attempt + 1
                    hint = {401: "check the key in $" + (self.args.api_key_env or "(none)"),
                            403: "check the key's permissions", 404: "check base_url and model"}.get(
                        status, "check base_url, model and the request fields")
                    raise EndpointError(f"{text} (run-wide: {hint}; answers so far are kept)")
            if attempt < self.args.retries:
                pause(wait)
        raise EndpointError(f"gave up after {self.args.retries + 1} attempts: {last}; rerun the same command to "
                            "continue (answers so far are kept)")

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
            meta["error"] = self._clean(f"unexpected reply shape: {json.dumps(reply)}")
            return Response(text="", meta=meta)
        meta["finish_reason"] = choice.get("finish_reason")
        if isinstance(reply.get("usage"), dict):
            meta["usage"] = {k: v for k, v in reply["usage"].items() if isinstance(v, int)}
        if reply.get("model"):
            meta["served_model"] = reply["model"]
            self._served.add(str(reply["model"]))
        return Response(text=text if isinstance(text, str) else json.dumps(text), meta=meta)

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:  # one pool for the adapter's life: its threads keep their connections
            self._pool = ThreadPoolExecutor(max_workers=self.args.concurrency, thread_name_prefix="openai")
        return self._pool

    def generate(self, requests: list[Request]) -> list[Response]:
        if len(requests) == 1 or self.args.concurrency == 1:
            return [self._answer(r) for r in requests]
        return list(self._workers().map(self._answer, requests))  # map keeps request order

    def stream(self, requests: Iterable[Request], batch_size: int) -> Iterator[tuple[Request, Response]]:
        """Keep ``concurrency`` requests in flight across the whole run, whatever the batch size;
        yield each answer as it arrives. When a request fails for good, or on Ctrl-C, nothing new
        is sent, the requests in flight are waited for and their answers yielded (they are paid
        for), then the failure is raised."""
        pool, source = self._workers(), iter(requests)
        in_flight: dict[Future, Request] = {}
        failure: BaseException | None = None

        def send_next() -> None:
            request = next(source, None)
            if request is not None:
                in_flight[pool.submit(self._answer, request)] = request

        for _ in range(self.args.concurrency):
            send_next()
        while in_flight:
            try:
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt as err:  # a second Ctrl-C while draining abandons the rest
                if failure is not None:
                    raise
                failure = err
                print(f"interrupted: waiting for the {len(in_flight)} request(s) in flight (Ctrl-C again to drop "
                      "them)", file=sys.stderr, flush=True)
                continue
            for future in finished:
                request = in_flight.pop(future)
                try:
                    response = future.result()
                except Exception as err:
                    failure = failure or err
                    continue
                yield request, response
                if failure is None:
                    send_next()
        if failure is not None:
            raise failure

    def provenance(self) -> dict:
        return {"device": f"endpoint {origin(self.url)}", "served_model": sorted(self._served)}


@register_model("openai_compat")
class OpenAICompatibleAlias(OpenAICompatible):
    """Same as ``openai`` (OpenAI-compatible endpoint: vLLM, SGLang, Gemini)."""
