"""The contract between the evaluator and a model: typed requests in, raw answers out.

An adapter subclasses ``ModelAdapter``, declares its arguments as a dataclass ``Args``
(``--model-arg key=value`` is type-checked against it; an unknown key is an error), and
implements ``generate(requests) -> responses``, one ``Response`` per ``Request``, in order.
A response holds raw text (parsed by eval/parser.py) and/or per-option scores (argmax,
no parsing). The evaluator batches requests (``--batch-size``); an adapter that cannot
batch simply loops.
"""
from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bench.config import from_dict, to_dict
from bench.format import Benchmark, Camera, Sample


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
        """The resolved arguments, stored in the run manifest."""
        return to_dict(self.args) if dataclasses.is_dataclass(self.args) else dict(vars(self.args))

    def prepare(self, benchmark: Benchmark) -> None:
        """Hook: see the benchmark once before answering (e.g. a letter prior)."""

    @abstractmethod
    def generate(self, requests: list[Request]) -> list[Response]:
        """Answer a batch of requests, one Response each, in order."""
