"""Shared fixtures. Every test runs offline: no hub, no download."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# The image index (bench/images.py) of test benchmarks goes to a throw-away folder, not ~/.cache.
os.environ.setdefault("CROSSVIEW_CACHE_DIR", tempfile.mkdtemp(prefix="crossview-test-cache-"))
# The tests' own helpers (tests/*.py), and this checkout's root for ``scripts`` (run as
# ``python -m scripts.<name>`` from the root; not an installed package).
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]

from eval.fake_endpoint import FakeEndpoint  # noqa: E402
from bench.tiny import make_tiny_benchmark  # noqa: E402


@pytest.fixture
def tiny_bench(tmp_path: Path) -> Path:
    """A valid tiny benchmark folder (16 samples, 4 views, 32 px, cameras on most views)."""
    return make_tiny_benchmark(tmp_path / "bench")


@pytest.fixture
def endpoint():
    """Start local chat-completions servers (eval/fake_endpoint.py); all are closed after the test."""
    servers: list[FakeEndpoint] = []

    def start(script=(), after="ok", **kwargs) -> FakeEndpoint:
        servers.append(FakeEndpoint(script, after, **kwargs))
        return servers[-1]
    yield start
    for server in servers:
        server.close()
