"""``oracle``: reads the right answer from the request. It tests the pipeline end to end:
every number it produces must be 100 % accuracy and zero distraction decay."""
from __future__ import annotations

from dataclasses import dataclass

from eval.adapters.base import ModelAdapter, Request, Response
from eval.adapters.registry import register_model


@register_model("oracle")
class Oracle(ModelAdapter):
    """Reads the right answer (pipeline check: 100 % accuracy, zero decay)."""
    @dataclass
    class Args:
        output: str = "verbose"  # "verbose" (a sentence, exercises the parser), "letter" or "scores"

    def __init__(self, args=None):
        super().__init__(args)
        if self.args.output not in ("verbose", "letter", "scores"):
            from common.config import ConfigError
            raise ConfigError(f"model_arg.output: {self.args.output!r} is not one of ['verbose', 'letter', 'scores']")

    def generate(self, requests: list[Request]) -> list[Response]:
        out = []
        for r in requests:
            answer = r.sample.answer
            if self.args.output == "scores":
                out.append(Response(scores=[1.0 if i == r.sample.answer_index else 0.0 for i in range(len(r.options))]))
            elif self.args.output == "letter":
                out.append(Response(text=answer))
            else:
                text = r.options[r.sample.answer_index]
                out.append(Response(text=f"Looking at all views, the option that fits is {text}.\nAnswer: ({answer})"))
        return out
