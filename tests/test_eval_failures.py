"""The evaluator under faults: a kill during tail repair, a tail cut inside a UTF-8 character,
two runs on one --out, a full disk while writing the summary, unreadable outputs."""
from __future__ import annotations

import builtins
import errno
import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bench.format import load_benchmark
from eval.__main__ import main
from eval.adapters import ModelAdapter, Response
from eval.predictions import PredictionWriter, read_predictions
from eval.runner import evaluate

FAST = dict(progress=False, plots=False, n_boot=50)


class Killed(BaseException):
    """Stands for SIGKILL at the injected point: nothing after it runs (not even except: blocks)."""


def kill_at_first_change(monkeypatch, target: Path) -> None:
    """Every write-mode handle of ``target`` dies on its first change: a write dies before any
    byte lands; a truncate (one atomic system call) lands, then the process dies."""
    real_open, real_truncate, real_ftruncate = builtins.open, os.truncate, os.ftruncate

    class Dying:
        def __init__(self, fh):
            self._fh = fh

        def write(self, data):
            raise Killed()

        def truncate(self, size=None):
            self._fh.truncate(size)
            raise Killed()

        def __getattr__(self, name):
            return getattr(self._fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()

    def fake_open(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == target.resolve() \
                and any(c in mode for c in "wa+"):
            return Dying(fh)
        return fh

    def dying_truncate(path, length):
        real_truncate(path, length)
        raise Killed()

    def dying_ftruncate(fd, length):
        real_ftruncate(fd, length)
        raise Killed()

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "truncate", dying_truncate)
    monkeypatch.setattr(os, "ftruncate", dying_ftruncate)


def test_kill_during_tail_repair_loses_no_complete_line(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    lines = [json.dumps({"key": f"k{i}", "raw": "答案是 (B)"}, ensure_ascii=False) + "\n" for i in range(50)]
    complete = "".join(lines).encode()
    (out / "predictions.jsonl").write_bytes(complete + '{"key": "k50", "raw": "答'.encode()[:-1])
    kill_at_first_change(monkeypatch, out / "predictions.jsonl")
    try:
        PredictionWriter(out).close()
    except Killed:
        pass
    monkeypatch.undo()
    data = (out / "predictions.jsonl").read_bytes()
    assert data.startswith(complete)  # every complete line, byte for byte
    assert len(read_predictions(out)) == 50


class Chinese(ModelAdapter):
    """Answers right, in Chinese (multi-byte UTF-8 in every line); can crash after N queries."""

    def __init__(self, crash_after: int = -1):
        super().__init__()
        self.crash_after, self.asked = crash_after, []

    def generate(self, requests):
        if 0 <= self.crash_after <= len(self.asked):
            raise KeyboardInterrupt
        self.asked += [r.key for r in requests]
        return [Response(text=f"答案是 ({r.sample.answer})") for r in requests]


def test_resume_after_a_tail_cut_inside_a_character(tiny_bench, tmp_path, caplog):
    bench = load_benchmark(tiny_bench)
    expected = evaluate(bench, Chinese(), tmp_path / "full", batch_size=4, **FAST)
    with pytest.raises(KeyboardInterrupt):
        evaluate(bench, Chinese(crash_after=8), tmp_path / "part", batch_size=4, **FAST)
    pred = tmp_path / "part" / "predictions.jsonl"
    full_lines = (tmp_path / "full" / "predictions.jsonl").read_bytes().splitlines(keepends=True)
    cut = full_lines[8][: full_lines[8].index("答".encode()) + 1]  # one byte of a three-byte character
    with open(pred, "ab") as fh:
        fh.write(cut)
    rest = Chinese()
    assert evaluate(bench, rest, tmp_path / "part", batch_size=4, **FAST) == expected
    assert len(rest.asked) == len(full_lines) - 8  # the cut line's query is asked again, nothing else
    # a complete line with a bad byte inside: skipped with a warning naming it, never a crash
    data = pred.read_bytes().splitlines(keepends=True)
    data[3] = data[3].replace("答".encode(), b"\xff\xfe\xfd", 1)
    pred.write_bytes(b"".join(data))
    caplog.set_level(logging.WARNING)
    again = Chinese()
    evaluate(bench, again, tmp_path / "part", batch_size=4, **FAST)
    assert len(again.asked) == 1
    assert any("line 4" in r.getMessage() and "predictions.jsonl" in r.getMessage() for r in caplog.records)
    assert main(["report", str(tmp_path / "part")]) == 0


def _count_args(server) -> list[str]:
    args = {"base_url": server.url, "model": "fake", "api_key_env": "", "retries": 0, "timeout": 20,
            "concurrency": 1}
    return [x for k, v in args.items() for x in ("--model-arg", f"{k}={v}")]


def test_two_runs_on_one_out_never_ask_twice(tiny_bench, tmp_path, endpoint, capsys):
    server = endpoint()
    release = server.hold_first_request()
    out = tmp_path / "o"
    cmd = ["run", "--bench", str(tiny_bench), "--model", "openai", "--out", str(out), "--no-progress",
           "--no-plots", "--n-boot", "20", "--batch-size", "4"] + _count_args(server)
    codes: dict[str, int] = {}
    first = threading.Thread(target=lambda: codes.setdefault("first", main(cmd)))
    first.start()
    assert server.first_request.wait(20)  # the first run holds OUT and is mid-request
    assert main(cmd) == 1  # a second run on the same OUT stops at once ...
    err = capsys.readouterr().err
    assert "another run" in err and str(os.getpid()) in err and socket.gethostname() in err and "--wait" in err
    waiting = threading.Thread(target=lambda: codes.setdefault("waiting", main(cmd + ["--wait"])))
    waiting.start()  # ... or waits for it with --wait
    release.set()
    first.join(60)
    waiting.join(60)
    assert codes == {"first": 0, "waiting": 0}
    prompts = [json.dumps(b, sort_keys=True) for b in server.bodies]
    assert len(prompts) == len(set(prompts)) == json.loads((out / "summary.json").read_text())["n_queries"]


def test_a_stale_lock_of_a_dead_process_is_taken_over(tiny_bench, tmp_path, caplog):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "o"
    out.mkdir()
    (out / ".lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    caplog.set_level(logging.WARNING)
    evaluate(tiny_bench, "oracle", out, **FAST)
    assert any("stale" in r.getMessage() and str(dead.pid) in r.getMessage() for r in caplog.records)
    assert (out / "summary.json").is_file()


def fail_disk_on(monkeypatch, folder: Path, name_part: str) -> None:
    """Writes to files in ``folder`` whose name contains ``name_part`` fill the disk half-way."""
    real_open = builtins.open

    class Full:
        def __init__(self, fh, path):
            self._fh, self._path = fh, path

        def write(self, data):
            self._fh.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self._path))

        def __getattr__(self, name):
            return getattr(self._fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()

    def fake_open(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and Path(file).parent.resolve() == folder.resolve() \
                and name_part in Path(file).name and any(c in mode for c in "wax+"):
            return Full(fh, file)
        return fh

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)


def test_full_disk_during_the_summary_keeps_the_previous_one(tiny_bench, tmp_path, monkeypatch, capsys):
    out = tmp_path / "o"
    cmd = ["run", "--bench", str(tiny_bench), "--model", "oracle", "--out", str(out), "--no-progress", "--n-boot", "20"]
    assert main(cmd) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    fail_disk_on(monkeypatch, out, "summary")
    assert main(cmd) == 1
    monkeypatch.undo()
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "No space left" in err[0] and "summary" in err[0], err
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert json.loads(after.pop("run.json"))["invocations"][-1]["answered"] == 0  # it records the rerun
    before.pop("run.json")
    assert after == before  # summary.json intact, no temporary files left behind
    assert main(["report", str(out)]) == 0


@pytest.mark.parametrize("what", ["summary.json", "run.json"])
def test_report_and_compare_name_an_unreadable_file(tiny_bench, tmp_path, capsys, what):
    for name in ("a", "b"):
        evaluate(tiny_bench, "oracle", tmp_path / name, **FAST)
    (tmp_path / "b" / what).write_text('{"acc": {"+0": ')  # cut short, as a full disk left it
    capsys.readouterr()
    for cmd in (["report", str(tmp_path / "b")], ["compare", str(tmp_path / "a"), str(tmp_path / "b")]):
        assert main(cmd) == 1
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and str(tmp_path / "b" / what) in err[0], err


def test_a_corrupt_image_mid_run_is_one_line(tiny_bench, tmp_path, capsys):
    """An image that breaks after validation (here: the adapter fails) ends in one line, no traceback."""
    class Broken(ModelAdapter):
        def generate(self, requests):
            raise OSError(errno.EIO, "Input/output error", str(requests[0].image_paths[0]))

    from eval.adapters.registry import _REGISTRY
    _REGISTRY["broken-test"] = Broken
    try:
        assert main(["run", "--bench", str(tiny_bench), "--model", "broken-test", "--out", str(tmp_path / "o"),
                     "--no-progress"]) == 1
    finally:
        del _REGISTRY["broken-test"]
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "Input/output error" in err[0] and ".png" in err[0], err
    assert "Traceback" not in err[0]
