"""Hugging Face MLLM adapters end to end: tiny random Qwen2-VL, LLaVA-OneVision and InternVL
folders (real transformers classes, built in tests/tiny_mllm.py) through ``python -m eval run``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval.__main__ import main
from eval.adapters import build_model
from eval.adapters.base import Request, RequestView
from eval.adapters.hf_common import chat_messages, per_view_tokens, token_runs
from eval.adapters.internvl import tile_grid
from eval.adapters.resolution import ResolutionPolicy
from bench.tiny import make_tiny_benchmark
from tiny_mllm import make_tiny_internvl, make_tiny_llava_onevision, make_tiny_qwen2_vl

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return make_tiny_benchmark(tmp_path_factory.mktemp("bench"), n_scenes=2, n_frames=1)


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory) -> Path:
    return make_tiny_qwen2_vl(tmp_path_factory.mktemp("qwen2_vl"))


def _predictions(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def _run(bench: Path, out: Path, model: str, *args: str, batch: int = 4) -> list[dict]:
    argv = ["run", "--bench", str(bench), "--model", model, "--out", str(out), "--no-progress", "--no-plots",
            "--n-boot", "20", "--batch-size", str(batch), "--settings", "+0,+1,all"]
    for a in args:
        argv += ["--model-arg", a]
    assert main(argv) == 0
    return _predictions(out)


def _check_meta(records: list[dict], resolution: str) -> None:
    for rec in records:
        meta = rec["meta"]
        assert rec["raw"] is not None and meta["resolution"] == resolution
        assert len(meta["image_sizes"]) == len(rec["view_order"])  # one frame per view here
        assert len(meta["image_tokens_per_view"]) == len(rec["view_order"])
        assert sum(meta["image_tokens_per_view"]) == meta["image_tokens"] > 0


def test_qwen2_vl_cli_fixed_resolution(bench, qwen_dir, tmp_path):
    records = _run(bench, tmp_path / "q", "qwen2_vl", f"path={qwen_dir}", "resolution=fixed:64x64",
                   "max_new_tokens=4")
    assert len(records) == 2 * (3 * 2 + 1)  # 2 scenes: SVS, MVN, NOTA at +0 and +1, and the "all" sample
    _check_meta(records, "fixed:64x64")
    # 64 px rounds to 56 (2 x 28-px merged patches a side): 4 tokens per frame, as the processor saw it
    assert all(r["meta"]["image_sizes"][0] == [56, 56] == r["meta"]["processed_sizes"][0] for r in records)
    assert all(set(r["meta"]["image_tokens_per_view"]) == {4} for r in records)
    manifest = json.loads((tmp_path / "q" / "run.json").read_text())
    assert manifest["model"] == "qwen2_vl" and manifest["model_args"]["resolution"] == "fixed:64x64"


def test_qwen2_vl_batching_matches_one_by_one(bench, qwen_dir, tmp_path):
    """Left padding must not change greedy answers: batch of 8 == one query at a time."""
    batched = _run(bench, tmp_path / "b8", "qwen2_vl", f"path={qwen_dir}", "resolution=fixed:56x56",
                   "max_new_tokens=3", batch=8)
    single = _run(bench, tmp_path / "b1", "qwen2_vl", f"path={qwen_dir}", "resolution=fixed:56x56",
                  "max_new_tokens=3", batch=1)
    assert [r["raw"] for r in batched] == [r["raw"] for r in single]


def test_qwen2_vl_budget_splits_pixels_across_views(bench, qwen_dir, tmp_path):
    records = _run(bench, tmp_path / "budget", "qwen2_vl", f"path={qwen_dir}", "resolution=budget:25088",
                   "max_new_tokens=2")
    for rec in records:
        sizes = rec["meta"]["image_sizes"]
        assert sum(w * h for w, h in sizes) <= 25088  # never over the budget
        assert all(w % 28 == 0 and h % 28 == 0 for w, h in sizes)
    one = next(r for r in records if len(r["view_order"]) == 1)
    four = next(r for r in records if len(r["view_order"]) == 4)
    assert one["meta"]["image_tokens"] > four["meta"]["image_tokens_per_view"][0]


@pytest.mark.slow
def test_qwen2_vl_as_a_subprocess(bench, qwen_dir, tmp_path):
    """The literal command line, in a fresh offline process."""
    out = tmp_path / "sub"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "eval", "run", "--bench", str(bench), "--model", "qwen2_vl",
                           "--model-arg", f"path={qwen_dir}", "--model-arg", "resolution=fixed:64x64",
                           "--model-arg", "max_new_tokens=2", "--out", str(out), "--settings", "+0",
                           "--limit", "2", "--no-progress", "--no-plots", "--n-boot", "20"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(_predictions(out)) == 2 and (out / "summary.json").exists()


def test_llava_onevision_cli(bench, tmp_path):
    path = make_tiny_llava_onevision(tmp_path / "llava")
    records = _run(bench, tmp_path / "l", "llava_onevision", f"path={path}", "resolution=fixed:64x48",
                   "max_new_tokens=3")
    _check_meta(records, "fixed:64x48")
    multi = [r for r in records if len(r["view_order"]) > 1]
    # multi-image mode: one 28-px base crop per image = 4 features + 1 newline token
    assert multi and all(set(r["meta"]["image_tokens_per_view"]) == {5} for r in multi)
    single = [r for r in records if len(r["view_order"]) == 1]
    assert single and all(r["meta"]["image_tokens"] > 5 for r in single)  # AnyRes tiles for one image


def test_internvl_native_cli(bench, tmp_path):
    path = make_tiny_internvl(tmp_path / "internvl")
    records = _run(bench, tmp_path / "i", "internvl", f"path={path}", "resolution=fixed:112x56",
                   "max_new_tokens=3")
    _check_meta(records, "fixed:112x56")
    # 112x56 -> two 56-px tiles plus the thumbnail, 4 tokens each
    assert all(set(r["meta"]["image_tokens_per_view"]) == {12} for r in records)


def test_internvl_refuses_remote_code_without_the_flag(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": "internvl_chat"}))
    bench = make_tiny_benchmark(tmp_path / "b", n_scenes=1, image_size=8)
    code = main(["run", "--bench", str(bench), "--model", "internvl", "--model-arg", f"path={tmp_path / 'm'}",
                 "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == 2 and "trust_remote_code=true" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert build_model("internvl", {"path": str(tmp_path / "m"), "trust_remote_code": True}).native is False


@pytest.mark.parametrize("args, needle", [({}, "path=DIR"), ({"path": "/nonexistent"}, "no config.json"),
                                          ({"path": "HERE", "resolution": "fixed:64"}, "fixed:WxH"),
                                          ({"path": "HERE", "dtype": "int8"}, "dtype")])
def test_bad_arguments_fail_before_loading(qwen_dir, args, needle):
    args = {k: (str(qwen_dir) if v == "HERE" else v) for k, v in args.items()}
    with pytest.raises(ValueError, match=needle):
        build_model("qwen2_vl", args)


def _request(frames_per_view: list[int], size: int = 100) -> Request:
    views = [RequestView(f"v{i}", i + 1, [Path(f"f{i}_{j}.png") for j in range(n)], [0.0] * n, None)
             for i, n in enumerate(frames_per_view)]
    return Request("k", None, "+0", views, "")


def test_resolution_policy():
    assert str(ResolutionPolicy.parse("fixed:1920x1080")) == "fixed:1920x1080"
    for bad in ("fixed:0x10", "budget:-1", "1280x720", "budget:abc"):
        with pytest.raises(ValueError):
            ResolutionPolicy.parse(bad)
    req = _request([1, 2])
    native = [(640, 480)] * 3
    assert ResolutionPolicy.parse("fixed:1280x720").frame_sizes(req, native) == [(1280, 720)] * 3
    assert ResolutionPolicy.parse("native").frame_sizes(req, native, multiple=28) == [(644, 476)] * 3
    sizes = ResolutionPolicy.parse("budget:307200").frame_sizes(req, native)
    # half the budget to the one-frame view, a quarter to each frame of the two-frame view
    assert sizes[0] == (452, 339) and sizes[1] == sizes[2] == (320, 240)


def test_prompt_splitting_and_token_accounting():
    msgs = chat_messages("View 1: <image>\nView 2: <image>\nQuestion?")
    kinds = [c["type"] for c in msgs[0]["content"]]
    assert kinds == ["text", "image", "text", "image", "text"]
    assert token_runs([1, 9, 9, 2, 9, 3, 9, 9, 9], 9) == [2, 1, 3]
    assert per_view_tokens(_request([1, 2]), [2, 1, 3]) == [2, 4]
    assert per_view_tokens(_request([1]), [2, 1]) is None
    assert tile_grid(1920, 1080, 448, 6) == (3, 2) and tile_grid(100, 100, 448, 6) == (1, 1)


FAKE_CONFIG = '''
from transformers import PretrainedConfig

class FakeInternVLConfig(PretrainedConfig):
    model_type = "internvl_chat"
'''
FAKE_MODEL = '''
import torch
from transformers import PreTrainedModel
from .configuration_fake import FakeInternVLConfig

class FakeInternVLChat(PreTrainedModel):
    """Stands in for OpenGVLab's remote code: checks what chat() receives and reports it."""
    config_class = FakeInternVLConfig
    num_image_token = 4

    def __init__(self, config):
        super().__init__(config)
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.post_init()

    def chat(self, tokenizer, pixel_values, question, generation_config, num_patches_list=None):
        assert question.count("<image>") == len(num_patches_list)
        assert pixel_values.shape[0] == sum(num_patches_list) and tuple(pixel_values.shape[1:]) == (3, 56, 56)
        assert generation_config["do_sample"] is False
        return "B"
'''


def test_internvl_remote_code_path(bench, tmp_path):
    """trust_remote_code=true loads the folder's own model code and calls its chat() per query."""
    from safetensors.torch import save_file
    import torch
    from tiny_mllm import build_tokenizer
    folder = tmp_path / "remote"
    folder.mkdir()
    (folder / "configuration_fake.py").write_text(FAKE_CONFIG)
    (folder / "modeling_fake.py").write_text(FAKE_MODEL)
    (folder / "config.json").write_text(json.dumps({
        "model_type": "internvl_chat", "architectures": ["FakeInternVLChat"], "force_image_size": 56,
        "auto_map": {"AutoConfig": "configuration_fake.FakeInternVLConfig", "AutoModel": "modeling_fake.FakeInternVLChat"}}))
    save_file({"w": torch.zeros(1)}, str(folder / "model.safetensors"))
    build_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]).save_pretrained(folder)
    records = _run(bench, tmp_path / "r", "internvl", f"path={folder}", "trust_remote_code=true",
                   "resolution=fixed:112x56", "max_tiles=2")
    # 112x56 -> 2 tiles + thumbnail per frame, 4 tokens a tile
    assert all(r["letter"] == "B" and r["meta"]["remote_code"] for r in records)
    assert all(r["meta"]["tiles"] == [3] * len(r["view_order"]) for r in records)
    assert all(set(r["meta"]["image_tokens_per_view"]) == {12} for r in records)


def test_qwen2_vl_device_map_and_throughput_args(bench, qwen_dir, tmp_path):
    """device_map=auto (accelerate) answers as the plain load does; device and batch args are
    throughput: changing them resumes the folder; run.json fingerprints the weights."""
    plain = _run(bench, tmp_path / "p", "qwen2_vl", f"path={qwen_dir}", "resolution=fixed:56x56", "max_new_tokens=3")
    mapped = _run(bench, tmp_path / "m", "qwen2_vl", f"path={qwen_dir}", "resolution=fixed:56x56", "max_new_tokens=3",
                  "device_map=auto", "max_batch=2")
    assert [r["raw"] for r in mapped] == [r["raw"] for r in plain]
    run = json.loads((tmp_path / "m" / "run.json").read_text())
    assert run["throughput_args"]["device_map"] == "auto" and "device_map" not in run["model_args"]
    assert len(run["model_provenance"]["weights"]["config.json"]) == 64
    again = _run(bench, tmp_path / "m", "qwen2_vl", f"path={qwen_dir}", "resolution=fixed:56x56", "max_new_tokens=3",
                 "device=cpu", "max_batch=0")  # a throughput change: accepted, nothing asked again
    assert len(again) == len(mapped)
    assert [i["answered"] for i in json.loads((tmp_path / "m" / "run.json").read_text())["invocations"]] == \
        [len(mapped), 0]
