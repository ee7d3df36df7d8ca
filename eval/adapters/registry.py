"""The one registry of model adapters: ``@register_model("name")``, looked up by key.

Adapters are found by importing every module of the ``eval.adapters`` package once, on the
first lookup, so adding a model is adding one file under eval/adapters/. A module that
fails to import (say a heavy optional dependency is missing) does not break the others;
its error is shown when a name cannot be found.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable

from eval.adapters.base import ModelAdapter

_REGISTRY: dict[str, type[ModelAdapter]] = {}
_IMPORT_ERRORS: dict[str, str] = {}
_DISCOVERED = False
_SKIP = {"base", "registry"}


def register_model(name: str) -> Callable[[type[ModelAdapter]], type[ModelAdapter]]:
    """Class decorator: make an adapter available as ``--model name``."""
    def wrap(cls: type[ModelAdapter]) -> type[ModelAdapter]:
        if not (isinstance(cls, type) and issubclass(cls, ModelAdapter)):
            raise TypeError(f"@register_model({name!r}) needs a ModelAdapter subclass, got {cls!r}")
        existing = _REGISTRY.get(name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(f"model name {name!r} is already registered by {existing.__module__}.{existing.__qualname__}")
        cls.name = name
        _REGISTRY[name] = cls
        return cls
    return wrap


def discover() -> None:
    """Import every adapter module once (idempotent)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    import eval.adapters as package
    for info in pkgutil.iter_modules(package.__path__):
        if info.name in _SKIP or info.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"eval.adapters.{info.name}")
        except Exception as err:  # a broken optional adapter must not hide the others
            _IMPORT_ERRORS[info.name] = f"{type(err).__name__}: {err}"


def available_models() -> list[str]:
    discover()
    return sorted(_REGISTRY)


def get_model_class(name: str) -> type[ModelAdapter]:
    """The adapter class registered as ``name``; KeyError with the known names otherwise."""
    discover()
    if name not in _REGISTRY:
        msg = f"unknown model {name!r}; available: {', '.join(sorted(_REGISTRY))}"
        if _IMPORT_ERRORS:
            msg += "; adapter modules that failed to import: " + "; ".join(
                f"{mod} ({err})" for mod, err in sorted(_IMPORT_ERRORS.items()))
        raise KeyError(msg)
    return _REGISTRY[name]


def build_model(name: str, args: dict[str, Any] | None = None) -> ModelAdapter:
    """Instantiate adapter ``name`` with ``args`` (checked against its Args dataclass)."""
    return get_model_class(name).from_args(args)
