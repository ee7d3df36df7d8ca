"""The packages form layers: each imports only the ones below it (README.md, "Layout").

  training/, pretrain/ (the cross-view run; the tower's own pretraining: neither imports the other)
  training/ ───── training/run.py only: the final test ─────► eval/
     │                                                          │
     ▼                                                          │
  inputs/ ◄─────────────────────────────────────────────────────┘
     ▼
  model/, bench/
     ▼
  common/

common (config loading, atomic writes, provenance) imports no package of the project; bench and
model import only common; inputs (the model's input pipeline) imports neither training, eval nor
Lightning; eval imports no training module; training imports eval only to run the final test;
pretrain imports neither training nor eval, and no package imports pretrain. Every import
counts, lazy ones inside functions included.

Within bench/, the benchmark format (bench/entities.py: the entity records' schema) sits below the
generator (bench/synth/): inputs, model and training read the schema from bench.entities, never
from the generator, and bench's modules import each other without a cycle.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "bench", "model", "inputs", "training", "pretrain", "eval")
# The one module of training/ that may import eval: it runs the held-out protocol at the end
# of python train.py through the evaluator's crossview adapter (training.run.evaluate_module).
TRAINING_MAY_IMPORT_EVAL = {"training/run.py"}


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function bodies included), as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's own package
                package = path.relative_to(ROOT).parent.parts
                base = list(package[:len(package) - node.level + 1])
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    """{"eval/metrics.py": {"bench.protocol", "numpy", ...}, ...} over every package's files."""
    graph = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            graph[str(path.relative_to(ROOT))] = imported_modules(path)
    return graph


def offenders(graph: dict[str, set[str]], package: str, forbidden: tuple[str, ...],
              allowed: set[str] = frozenset()) -> list[str]:
    return sorted(f"{file} imports {module}" for file, modules in graph.items()
                  if file.startswith(package + "/") and file not in allowed
                  for module in modules if module.split(".")[0] in forbidden)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_walker_sees_imports_lazy_ones_included(graph):
    """An empty or blind walk would pass every rule below: check that it finds known imports."""
    assert sum(f.startswith(p + "/") for f in graph for p in PACKAGES) > 100
    assert "bench.protocol" in graph["eval/metrics.py"]  # eval imports bench (top of the file)
    assert "inputs.checkpoint" in graph["eval/adapters/crossview.py"]  # inside __init__
    assert "eval.adapters.crossview" in graph["training/run.py"]  # inside evaluate_module
    assert offenders(graph, "eval", ("bench",))  # the rule helper itself can fail


def test_common_imports_no_package_of_the_project(graph):
    assert offenders(graph, "common", ("bench", "model", "inputs", "training", "eval", "scripts")) == []
    # the plumbing is imported from every layer above it, not copied there
    users = {f.split("/")[0] for f, modules in graph.items() if any(m.split(".")[0] == "common" for m in modules)}
    assert {"bench", "inputs", "training", "eval"} <= users


def test_bench_and_model_import_no_package_above_them(graph):
    assert offenders(graph, "bench", ("model", "inputs", "training", "eval")) == []
    assert offenders(graph, "model", ("inputs", "training", "eval", "lightning", "pytorch_lightning")) == []


def test_inputs_imports_neither_training_eval_nor_lightning(graph):
    assert offenders(graph, "inputs", ("training", "eval", "lightning", "pytorch_lightning")) == []


def test_pretraining_stands_apart_from_the_cross_view_run(graph):
    assert offenders(graph, "pretrain", ("training", "eval")) == []
    for package in ("common", "bench", "model", "inputs", "training", "eval"):
        assert offenders(graph, package, ("pretrain",)) == [], package


def test_eval_imports_nothing_from_training(graph):
    assert offenders(graph, "eval", ("training",)) == []


def test_training_imports_eval_only_to_run_the_final_test(graph):
    assert offenders(graph, "training", ("eval",), allowed=TRAINING_MAY_IMPORT_EVAL) == []
    for file in TRAINING_MAY_IMPORT_EVAL:  # the allow-list names a file that still exists and needs it
        assert any(m.split(".")[0] == "eval" for m in graph[file]), file


SCORE_IN_A_FRESH_PROCESS = """
import json, sys
from eval.__main__ import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": sorted(m for m in sys.modules
                  if m.split(".")[0] in ("lightning", "pytorch_lightning", "lightning_fabric", "training"))}))
"""


def test_scoring_a_checkpoint_loads_neither_lightning_nor_training(synth_bench, tiny_perception, tmp_path):
    import torch

    from common.config import to_dict
    from inputs.entity_batch import WordVocab
    from training.config import TrainConfig
    from training.module import EntityModule
    cfg = TrainConfig()
    cfg.perception.folder = str(tiny_perception)
    cfg.model.width, cfg.model.heads = 16, 2
    module = EntityModule(to_dict(cfg), vocab=WordVocab.build(["how many people"]).itos)
    ckpt = tmp_path / "tiny.ckpt"
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, ckpt)
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-c", SCORE_IN_A_FRESH_PROCESS, "run", "--bench", str(synth_bench / "test"), "--model",
         "crossview", "--model-arg", f"ckpt={ckpt}", "--model-arg", f"cache_dir={tiny_perception.parent / 'cache'}",
         "--settings", "+0",
         "--out", str(out), "--no-progress", "--no-plots", "--n-boot", "10"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and (out / "summary.json").is_file(), proc.stderr[-2000:]
    assert result["loaded"] == [], result["loaded"]


TEST_HELPERS = {p.stem for p in (ROOT / "tests").glob("*.py")}  # conftest, browse_runs, tiny_mllm, ...


def test_nothing_outside_tests_imports_tests_and_scripts_edit_no_sys_path():
    """The packages, scripts/ and train.py never reach into tests/ (its helpers are importable
    only because conftest puts tests/ on sys.path), and scripts run as ``python -m scripts.<name>``
    from the root without editing sys.path."""
    files = [p for d in (*PACKAGES, "scripts") for p in sorted((ROOT / d).rglob("*.py"))] + [ROOT / "train.py"]
    reach = sorted(f"{p.relative_to(ROOT)} imports {m}" for p in files for m in imported_modules(p)
                   if m.split(".")[0] == "tests" or m.split(".")[0] in TEST_HELPERS)
    assert reach == []
    edits = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scripts").glob("*.py")
                   if any(isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name)
                          and n.value.id == "sys" for n in ast.walk(ast.parse(p.read_text()))))
    assert edits == []


FILE_READS = re.compile(r"Path\(__file__\)|Path\.cwd\(\)|create_model\(|load_file\(|torch\.load\(|\bopen\(|read_text\(|"
                        r"read_bytes\(|from_pretrained\(")


def test_model_reads_no_file():
    """model/ takes built modules and tensors: no repository-relative lookup, no weights loading."""
    found = sorted(f"{p.relative_to(ROOT)}: {m.group(0)}" for p in (ROOT / "model").rglob("*.py")
                   for m in FILE_READS.finditer(p.read_text()))
    assert found == []


def test_inputs_model_and_training_never_import_the_generator(graph):
    """The entity schema and the questions' class words are bench.entities; a missing benchmark is
    generated through bench.generated: inputs/, model/ and training/ import nothing of bench.synth."""
    found = sorted(f"{path.relative_to(ROOT)}: {m}" for package in ("inputs", "model", "training")
                   for path in sorted((ROOT / package).rglob("*.py"))
                   for m in graph[str(path.relative_to(ROOT))] if m == "bench.synth" or m.startswith("bench.synth."))
    assert found == []


def test_the_schema_imports_nothing_from_the_generator(graph):
    assert graph["bench/entities.py"] <= {"__future__"}, graph["bench/entities.py"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def bench_import_graph() -> dict[str, set[str]]:
    """bench's module -> the bench modules it imports (lazy imports included), as dotted names;
    ``from bench.synth import x`` counts as importing ``bench.synth.x`` where that is a module."""
    modules = {_module_name(p): p for p in sorted((ROOT / "bench").rglob("*.py"))}
    out = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name.split(".")[:len(name.split(".")) - node.level + (path.stem == "__init__")]
                    base = ".".join(package + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                parts = target.split(".")
                known = [".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in modules]
                if known:
                    found.add(known[0])
        out[name] = found - {name}
    return out


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as [a, b, ..., a], or [] if it has none."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_bench_modules_import_each_other_without_a_cycle():
    graph = bench_import_graph()
    assert "bench.synth.entity_labels" in graph["bench.synth.generate"]  # the walk sees imports
    assert "bench.entities" in graph["bench.synth.entity_labels"]
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # the finder finds one
    cycle = import_cycle(graph)
    assert cycle == [], "import cycle in bench/: " + " -> ".join(cycle)
