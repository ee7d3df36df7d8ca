"""Model adapters: one base class, one registry. Adding a model is one file in this folder:

    from eval.adapters import ModelAdapter, Request, Response, register_model

    @register_model("my_model")
    class MyModel(ModelAdapter):
        @dataclass
        class Args:
            checkpoint: str = ""

        def generate(self, requests: list[Request]) -> list[Response]:
            return [Response(text=...) for r in requests]

Every module here is imported on the first registry lookup (see registry.py).
"""
from eval.adapters.base import ModelAdapter, Request, RequestView, Response
from eval.adapters.registry import available_models, build_model, get_model_class, register_model

__all__ = ["ModelAdapter", "Request", "RequestView", "Response", "available_models", "build_model",
           "get_model_class", "register_model"]
