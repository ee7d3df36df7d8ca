"""The contract between the evaluator and a model: typed requests in, raw answers out.

An adapter subclasses ``ModelAdapter``, declares its arguments as a dataclass ``Args``
(``--model-arg key=value`` is type-checked against it; an unknown key is an error), and
implements ``generate(requests) -> responses``, one ``Response`` per ``Request``, in order.
A response holds raw text (parsed by eval/parser.py) and/or per-option scores (argmax,
no parsing). The evaluator batches requests (``--batch-size``); an adapter that cannot
batch simply loops. An adapter that answers many requests at once without batching them
(an HTTP endpoint) overrides ``stream`` instead, so its concurrency is independent of the
batch size.

Arguments that only change how fast answers come (concurrency, timeouts, retries, batch
size, device) are declared with ``throughput(default)``: a resumed run may change them,
while every other argument is part of the run's identity.
"""
from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator

from common.config import from_dict, to_dict
from bench.format import Benchmark, Camera, Sample


THROUGHPUT = "throughput"


def throughput(default: Any) -> Any:
    """An ``Args`` field that changes speed, not answers (resuming may change it)."""
    return field(default=default, metadata={THROUGHPUT: True})


@dataclass(frozen=True)
class RequestView:
    """One view as shown to the model."""
    view_id: str
    position: int  # 1-based place in the presentation order ("View 1" in the prompt)
    image_paths: list[Path]  # absolute paths, one per frame
    times: list[float]  # frame times in seconds, aligned with image_paths
    camera: Camera | None  # None: uncalibrated


@dataclass(frozen=True)
class Request:
    """One query: a sample (options already rotated under --circular) under one setting."""
    key: str  # unique id of this query in predictions.jsonl
    sample: Sample  # the sample as asked: options, answer and distractors follow the rotation
    setting: str  # "+0", "+2", "-1", "all", or "extract" for a fallback-extraction request
    views: list[RequestView]  # in presentation order; [] for a text-only request
    prompt: str  # the unified prompt; one "<image>" per entry of image_paths, in order

    @property
    def image_paths(self) -> list[Path]:
        return [p for v in self.views for p in v.image_paths]

    @property
    def options(self) -> list[str]:
        return self.sample.options


@dataclass
class Response:
    """A model's answer. Give ``text``, ``scores`` or both; scores win when present."""
    text: str | None = None  # raw generated text, kept verbatim in predictions.jsonl
    scores: list[float] | None = None  # one per option (higher = more likely), e.g. log-likelihoods
    meta: dict[str, Any] = field(default_factory=dict)  # anything worth keeping (token counts, ...)


class ModelAdapter(ABC):
    """Base of every model the evaluator can run.

    Subclass contract:
      - ``Args``: a dataclass of the model's arguments (defaults for all fields).
      - ``generate(requests)``: a list of Requests -> a list of Responses, same length/order.
      - optional ``prepare(benchmark)``: called once before the first request of a run.
      - optional ``blind = True``: the model ignores images (a text-only baseline).
    Register with ``@register_model("name")`` from eval.adapters.registry.
    """
    name: ClassVar[str] = ""  # set by @register_model

    @dataclass
    class Args:
        pass

    def __init__(self, args: Any = None):
        self.args = args if args is not None else self.Args()

    @classmethod
    def from_args(cls, args: dict[str, Any] | None = None) -> "ModelAdapter":
        """Build from a plain dict (``--model-arg`` values); raises ConfigError on a bad key/type."""
        return cls(from_dict(cls.Args, dict(args or {}), path="model_arg"))

    def args_dict(self) -> dict[str, Any]:
        """Every resolved argument."""
        return to_dict(self.args) if dataclasses.is_dataclass(self.args) else dict(vars(self.args))

    @classmethod
    def throughput_keys(cls) -> set[str]:
        """Names of the ``Args`` fields declared with ``throughput(...)``."""
        if not dataclasses.is_dataclass(cls.Args):
            return set()
        return {f.name for f in dataclasses.fields(cls.Args) if f.metadata.get(THROUGHPUT)}

    def identity_args(self) -> dict[str, Any]:
        """The arguments that change answers: the run manifest's ``model_args``."""
        keys = self.throughput_keys()
        return {k: v for k, v in self.args_dict().items() if k not in keys}

    def throughput_args(self) -> dict[str, Any]:
        """The arguments that change only speed (recorded, not compared on resume)."""
        keys = self.throughput_keys()
        return {k: v for k, v in self.args_dict().items() if k in keys}

    def provenance(self) -> dict[str, Any]:
        """Facts about what answered, for run.json (device, weights fingerprint, served model)."""
        return {"device": "cpu"}

    def prepare(self, benchmark: Benchmark) -> None:
        """Hook: see the benchmark once before answering (e.g. a letter prior)."""

    @abstractmethod
    def generate(self, requests: list[Request]) -> list[Response]:
        """Answer a batch of requests, one Response each, in order."""

    def stream(self, requests: Iterable[Request], batch_size: int) -> Iterator[tuple[Request, Response]]:
        """(request, response) pairs as answers complete, in any order.

        The default asks ``generate`` for consecutive batches of ``batch_size``. An adapter
        with its own pool of workers overrides it to keep that pool busy across batches.
        """
        batch: list[Request] = []
        for request in requests:
            batch.append(request)
            if len(batch) == batch_size:
                yield from self._answer_batch(batch)
                batch = []
        if batch:
            yield from self._answer_batch(batch)

    def _answer_batch(self, batch: list[Request]) -> Iterator[tuple[Request, Response]]:
        responses = self.generate(batch)
        if len(responses) != len(batch):
            raise RuntimeError(f"model {self.name!r} returned {len(responses)} responses for {len(batch)} requests")
        return zip(batch, responses)
