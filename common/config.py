"""Typed configs: dataclasses loaded from YAML with ``key=value`` overrides.

Every config in the repo is a (possibly nested) dataclass. ``load_config`` converts a YAML
mapping into it once, at the boundary, and refuses unknown keys and wrongly typed values,
so a typo in a config file or on the command line fails loudly instead of being ignored.

Overrides use dotted paths for nested fields: ``model.fusion.depth=4``. Values are parsed
as YAML scalars (``true``, ``3``, ``1e-3``, ``[1, 2]``, ``null``) and then type-checked.
``parse_key_value`` is the project's one ``key=value`` parser (overrides here, the evaluator's
``--model-arg``, ``bench import hf --map``).

A config dataclass states the allowed range of its numeric fields in a class attribute,
``RANGES = {"lr": "> 0", "p_drop": "[0, 1]", "frames": (">= 7", "why")}``: a value outside
it fails at load time, naming the dotted key and the range (each item of a list field is
checked; None passes).
"""
from __future__ import annotations

import dataclasses
import operator
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file or override does not fit its dataclass."""


class KeyValueError(ValueError):
    """An item that is not ``key=value``; ``kind`` says what is wrong: "form" (no ``=``),
    "key" (an empty key) or "value" (not YAML). The message is meant to follow the item."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def parse_key_value(item: str, parse_value: bool = True) -> tuple[str, Any]:
    """``"key=value"`` -> (key, value): the key stripped; the value YAML-parsed (an empty value
    stays ``""``) or, with ``parse_value=False``, the text after the first ``=`` as it is.

    Raises:
        KeyValueError: no ``=``, an empty key, or a value that is not YAML.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep:
        raise KeyValueError("is not of the form key=value", "form")
    if not key:
        raise KeyValueError("has an empty key", "key")
    if not parse_value:
        return key, raw
    try:
        return key, (yaml.safe_load(raw) if raw != "" else "")
    except yaml.YAMLError as err:
        raise KeyValueError(f"cannot parse value: {err}", "value") from None


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _coerce(value: Any, tp: Any, path: str) -> Any:
    """Check ``value`` against the annotation ``tp``; convert where it is lossless."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, path)
            except ConfigError:
                continue
        raise ConfigError(f"{path}: {value!r} does not match {tp}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{path}: {value!r} is not one of {list(args)}")
        return value
    if _is_dataclass_type(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping for {tp.__name__}, got {value!r}")
        return from_dict(tp, value, path)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ConfigError(f"{path}: expected {len(args)} items, got {len(value)}")
            return tuple(_coerce(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        item_tp = args[0] if args else Any
        items = [_coerce(v, item_tp, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        key_tp, val_tp = args if args else (Any, Any)
        return {_coerce(k, key_tp, path): _coerce(v, val_tp, f"{path}.{k}") for k, v in value.items()}
    if tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        return tp(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):
            # YAML 1.1 reads "2e-3" (no dot) as a string; accept what Python reads as a float.
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(f"{path}: expected a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{path}: expected {tp.__name__}, got {value!r}")
    return value


def from_dict(cls: type[T], data: dict, path: str = "") -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys and bad types raise ConfigError.

    A removed option stays readable where it is set to the value it defaulted to (so the
    configs stored in older runs and checkpoints still load): ``cls.RETIRED_KEYS`` maps its
    name to that value and the reason it went. Any other value of it is an error.

    An option added with a default that changes what older configs did is read, where a
    stored config lacks it, as the value that keeps their behaviour: ``cls.ADDED_KEYS`` maps
    its name to that value and the reason. Configs built by ``load_config`` start from the
    full defaults, so they always carry it and get the new default.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    added = getattr(cls, "ADDED_KEYS", {})
    if any(key not in data for key in added):
        data = {**{key: value for key, (value, _) in added.items()}, **data}
    retired = getattr(cls, "RETIRED_KEYS", {})
    if any(key in retired for key in data):
        data = dict(data)
        for key, (value, why) in retired.items():
            if key in data and data.pop(key) != value:
                where = f"{path}.{key}" if path else key
                raise ConfigError(f"{where}: this option was removed ({why}); only {value!r}, what it "
                                  "did by default, is still accepted")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        where = path or cls.__name__
        raise ConfigError(
            f"unknown config key(s) {', '.join(repr(path + '.' + k if path else k) for k in unknown)} "
            f"in {where}; valid keys: {', '.join(sorted(fields))}"
        )
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _coerce(value, hints[name], f"{path}.{name}" if path else name)
    cfg = cls(**kwargs)
    if not path:  # the whole config is built: check every range once, with full dotted keys
        check_ranges(cfg)
    return cfg


_BOUND = re.compile(r"^(>=|<=|>|<)\s*(\S+)$")
_INTERVAL = re.compile(r"^([\[(])\s*([^,]+?)\s*,\s*([^\])]+?)\s*([\])])$")
_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def in_range(value: float, spec: str) -> bool:
    """Whether ``value`` lies in ``spec``: "> 0", ">= 1", "<= 5", "[0, 1]", "(0, 1]", "[0, 1)"."""
    spec = spec.strip()
    bound = _BOUND.match(spec)
    if bound:
        return _OPS[bound.group(1)](value, float(bound.group(2)))
    interval = _INTERVAL.match(spec)
    if not interval:
        raise ValueError(f"not a range: {spec!r}")
    left, low, high, right = interval.groups()
    return ((value >= float(low)) if left == "[" else (value > float(low))) and \
        ((value <= float(high)) if right == "]" else (value < float(high)))


def check_ranges(cfg: Any, path: str = "") -> None:
    """Raise ConfigError for the first field of ``cfg`` (a dataclass, nested ones included)
    outside the range its class's ``RANGES`` states; the message names the dotted key."""
    ranges = getattr(type(cfg), "RANGES", {})
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        key = f"{path}.{f.name}" if path else f.name
        if dataclasses.is_dataclass(value):
            check_ranges(value, key)
            continue
        if f.name not in ranges or value is None:
            continue
        spec, why = ranges[f.name] if isinstance(ranges[f.name], tuple) else (ranges[f.name], "")
        items = list(enumerate(value)) if isinstance(value, (list, tuple)) else [(None, value)]
        for i, item in items:
            if not in_range(item, spec):
                name = key if i is None else f"{key}[{i}]"
                raise ConfigError(f"{name}: {item!r} is out of range; allowed: {spec}"
                                  + (f" ({why})" if why else ""))


def to_dict(cfg: Any) -> dict:
    """The plain-dict (YAML-ready) form of a config dataclass."""
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value
    return plain(cfg)


def _set_dotted(data: dict, dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"override {dotted!r}: {key!r} is not a section")
        node = child
    node[keys[-1]] = value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``key=value`` strings (YAML-parsed values) to a nested dict, in order."""
    for item in overrides:
        try:
            key, value = parse_key_value(item)
        except KeyValueError as err:
            raise ConfigError(f"override {item!r}{':' if err.kind == 'value' else ''} {err}") from None
        _set_dotted(data, key, value)
    return data


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None,
                base: T | None = None) -> T:
    """Load ``cls`` from an optional YAML file, then apply ``key=value`` overrides.

    Args:
        cls: the config dataclass.
        path: YAML file whose top-level mapping matches ``cls``'s fields; None for defaults.
        overrides: ``["a.b=3", "seed=7"]``; applied after the file.
        base: start from this instance instead of ``cls()`` (fields not in the file keep it).
    """
    data = to_dict(base if base is not None else cls())
    if path is not None:
        path = Path(path)
        _deep_merge(data, read_yaml_with_bases(path))
    apply_overrides(data, list(overrides or []))
    try:
        return from_dict(cls, data)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}" if path else str(err)) from None


def read_yaml_with_bases(path: Path, _seen: tuple = ()) -> dict:
    """A YAML mapping; a top-level ``_base_: other.yaml`` (relative to this file) is loaded
    first and this file's keys are merged over it, so an ablation config states only what
    it changes."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    if path.resolve() in _seen:
        raise ConfigError(f"{path}: _base_ cycle")
    with open(path) as fh:
        try:
            loaded = yaml.safe_load(fh) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: invalid YAML: {err}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    base = loaded.pop("_base_", None)
    if base is None:
        return loaded
    merged = read_yaml_with_bases(path.parent / base, _seen + (path.resolve(),))
    _deep_merge(merged, loaded)
    return merged


def _deep_merge(into: dict, new: dict) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = value


def save_config(cfg: Any, path: str | Path) -> None:
    """Write the resolved config as YAML."""
    with open(path, "w") as fh:
        yaml.safe_dump(to_dict(cfg), fh, sort_keys=False)
