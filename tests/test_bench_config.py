"""Typed configs: YAML + key=value overrides, unknown keys and bad types are errors."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from common.config import ConfigError, load_config, save_config, to_dict


@dataclass
class Inner:
    depth: int = 2  # number of blocks
    dropout: float = 0.1
    kind: str = "a"


@dataclass
class Outer:
    seed: int = 0
    name: str = "run"
    flags: list[int] = field(default_factory=lambda: [1, 2])
    inner: Inner = field(default_factory=Inner)
    path: str | None = None


def test_exponent_without_dot_is_a_number():
    # YAML 1.1 reads "2e-3" as a string; a researcher typing optim.lr=2e-3 means a float.
    assert load_config(Outer, None, ["inner.dropout=2e-3"]).inner.dropout == 0.002
    with pytest.raises(ConfigError, match="inner.dropout: expected a number, got 'x1'"):
        load_config(Outer, None, ["inner.dropout=x1"])


def test_defaults_file_and_overrides(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("seed: 3\ninner:\n  depth: 4\n")
    cfg = load_config(Outer, cfg_file, ["inner.dropout=0", "path=/x", "flags=[3]"])
    assert cfg == Outer(seed=3, flags=[3], inner=Inner(depth=4, dropout=0.0), path="/x")
    save_config(cfg, tmp_path / "out.yaml")
    assert load_config(Outer, tmp_path / "out.yaml") == cfg


@pytest.mark.parametrize("override,words", [
    ("sed=1", "unknown config key(s) 'sed'"),
    ("inner.deep=1", "unknown config key(s) 'inner.deep'"),
    ("seed=abc", "seed: expected an integer"),
    ("inner.depth=1.5", "inner.depth: expected an integer"),
    ("seed", "not of the form key=value"),
    ("inner=3", "expected a mapping"),
])
def test_bad_overrides(override, words):
    with pytest.raises(ConfigError) as info:
        load_config(Outer, None, [override])
    assert words in str(info.value)


def test_unknown_key_in_file_names_the_file(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("inner:\n  widht: 3\n")
    with pytest.raises(ConfigError, match=r"c.yaml: unknown config key\(s\) 'inner.widht'"):
        load_config(Outer, cfg_file)


def test_base_file_is_merged_under(tmp_path):
    (tmp_path / "base.yaml").write_text("seed: 3\ninner:\n  depth: 4\n  kind: b\n")
    (tmp_path / "child.yaml").write_text("_base_: base.yaml\ninner:\n  depth: 1\n")
    cfg = load_config(Outer, tmp_path / "child.yaml")
    assert cfg.seed == 3 and cfg.inner.depth == 1 and cfg.inner.kind == "b"


def test_one_key_value_parser_for_overrides_model_args_and_maps():
    """common.config.parse_key_value is what config overrides, --model-arg and --map all use."""
    from common.config import KeyValueError, parse_key_value
    from bench.import_presets import parse_map
    from eval.inputs import parse_model_args
    assert parse_key_value(" a.b =[1, 2]") == ("a.b", [1, 2])
    assert parse_key_value("k=") == ("k", "")
    assert parse_key_value("k= x=y ", parse_value=False) == ("k", " x=y ")
    for item, kind in (("novalue", "form"), ("=3", "key"), ("k=[1,", "value")):
        with pytest.raises(KeyValueError) as err:
            parse_key_value(item)
        assert err.value.kind == kind
    with pytest.raises(ConfigError, match=r"override 'seed' is not of the form key=value"):
        load_config(Outer, None, ["seed"])
    with pytest.raises(ConfigError, match=r"override ' =1' has an empty key"):
        load_config(Outer, None, [" =1"])
    with pytest.raises(ConfigError, match=r"override 'seed=\[': cannot parse value"):
        load_config(Outer, None, ["seed=["])
    assert parse_model_args(["a=1", "b", "c=[", "=2"]) == (
        {"a": 1}, ["ERROR --model-arg 'b': expected key=value", "ERROR --model-arg 'c=[': cannot parse the value",
                   "ERROR --model-arg '=2': expected key=value"])
    assert parse_map(["task= category ", "images", "task="]) == (
        {"task": "category"}, ["ERROR --map 'images': expected field=column", "ERROR --map 'task=': expected field=column"])


@dataclass
class WithRetired:
    RETIRED_KEYS = {"old": (False, "no gain")}  # a class attribute, not a field
    depth: int = 2


def test_a_retired_key_loads_only_at_its_old_default(tmp_path):
    assert load_config(WithRetired, None, ["old=false", "depth=3"]) == WithRetired(depth=3)
    with pytest.raises(ConfigError, match=r"old: this option was removed \(no gain\); only False"):
        load_config(WithRetired, None, ["old=true"])
    assert "old" not in to_dict(WithRetired())
