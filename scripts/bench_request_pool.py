"""Requests in flight against a local OpenAI-compatible endpoint: what ``concurrency`` buys.

    python -m scripts.bench_request_pool [--concurrency 16] [--batch-size 8] [--delay 0.2] [--scenes 4]

Starts the fake endpoint of the tests (eval/fake_endpoint.py, loopback only) that holds every
request ``--delay`` seconds, runs ``python -m eval``'s ``openai`` adapter over a tiny
benchmark and prints the peak number of requests the server saw at once, the TCP
connections it was opened over, the request count and the wall time.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.tiny import make_tiny_benchmark
from eval.fake_endpoint import FakeEndpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the server holds each request")
    parser.add_argument("--scenes", type=int, default=4, help="tiny-benchmark scenes (15 queries each)")
    args = parser.parse_args(argv)
    from eval.adapters import available_models
    from eval.runner import evaluate
    available_models()  # import every adapter module now: the wall time is the run's alone
    with tempfile.TemporaryDirectory() as tmp:
        bench = make_tiny_benchmark(Path(tmp) / "bench", n_scenes=args.scenes, image_size=8)
        server = FakeEndpoint(delay=args.delay)
        start = time.perf_counter()
        try:
            summary = evaluate(bench, "openai", Path(tmp) / "out", batch_size=args.batch_size, progress=False,
                               plots=False, n_boot=20,
                               model_args={"base_url": server.url, "model": "fake", "api_key_env": "",
                                           "concurrency": args.concurrency})
        finally:
            server.close()
        wall = time.perf_counter() - start
    print(json.dumps({"concurrency": args.concurrency, "batch_size": args.batch_size, "delay_s": args.delay,
                      "requests": server.count, "queries": summary["n_queries"],
                      "peak_in_flight": server.peak_in_flight, "connections": len(server.connections),
                      "wall_s": round(wall, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
