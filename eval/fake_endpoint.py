"""A local OpenAI-compatible chat-completions server: the endpoint tests' server, and the one
scripts/bench_request_pool.py measures the ``openai`` adapter's concurrency against.

Binds to 127.0.0.1 only, answers at most ``max_requests`` requests (later ones get a 503)
and drops idle keep-alive connections after ``idle_timeout`` seconds, so a test that goes
wrong cannot hang or flood anything. Replies follow ``script`` (one action per request),
then ``after``. An action is "ok" (an answer), a status code as a string ("429"), or a
callable ``(handler, body) -> (status, headers, bytes)``.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

ANSWER = "The answer is (B)."


def ok_reply(body: dict, text: str = ANSWER) -> tuple[int, dict, bytes]:
    reply = {"model": body.get("model", "?"), "choices": [{"message": {"role": "assistant", "content": text},
             "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
    return 200, {"Content-Type": "application/json"}, json.dumps(reply).encode()


def error_reply(status: int, message: str) -> tuple[int, dict, bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps({"error": {"message": message}}).encode()


class FakeEndpoint:
    """A threaded HTTP/1.1 server with a thread-safe log of what it was sent.

    Args:
        script: actions for the first requests, in order.
        after: the action for every later request.
        delay: seconds each request is held before it is answered (in-flight counting).
        max_requests: answered requests at most; later ones get a 503.
        idle_timeout: seconds an idle keep-alive connection is kept open.
    """

    def __init__(self, script: list | tuple = (), after: Any = "ok", delay: float = 0.0, max_requests: int = 2000,
                 idle_timeout: float = 10.0):
        self.script, self.after, self.delay, self.max_requests = list(script), after, delay, max_requests
        self.bodies: list[dict] = []
        self.auth: list[str | None] = []
        self.methods: list[str] = []
        self.connections: set[tuple[str, int]] = set()  # client (host, port): one per TCP connection
        self.in_flight = 0
        self.peak_in_flight = 0
        self.lock = threading.Lock()
        self.gate: threading.Event | None = None  # when set up, the first request waits for it
        self.first_request = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like a real API server
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall
            timeout = idle_timeout

            def log_message(self, *args):  # keep pytest output clean
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                with endpoint.lock:
                    endpoint.bodies.append(body)
                    endpoint.auth.append(self.headers.get("Authorization"))
                    endpoint.methods.append(method)
                    endpoint.connections.add(self.client_address)
                    n = len(endpoint.bodies)
                    action = endpoint.script.pop(0) if endpoint.script else endpoint.after
                    endpoint.in_flight += 1
                    endpoint.peak_in_flight = max(endpoint.peak_in_flight, endpoint.in_flight)
                try:
                    if n == 1:
                        endpoint.first_request.set()
                        if endpoint.gate is not None:
                            endpoint.gate.wait(timeout=30)
                    if endpoint.delay:
                        time.sleep(endpoint.delay)
                    if n > endpoint.max_requests:
                        status, headers, data = error_reply(503, "request budget of the test server is spent")
                    elif callable(action):
                        status, headers, data = action(self, body)
                    elif action == "ok":
                        status, headers, data = ok_reply(body)
                    else:
                        status, headers, data = error_reply(int(action), f"status {action}")
                finally:
                    with endpoint.lock:
                        endpoint.in_flight -= 1
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                self._serve("POST")

            def do_GET(self):
                self._serve("GET")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.origin}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def count(self) -> int:
        return len(self.bodies)

    def hold_first_request(self) -> threading.Event:
        """Make the first request wait until the returned event is set (or 30 s pass)."""
        self.gate = threading.Event()
        return self.gate

    def close(self) -> None:
        if self.gate is not None:
            self.gate.set()
        self.server.shutdown()
        self.server.server_close()


Action = Callable[[BaseHTTPRequestHandler, dict], tuple[int, dict, bytes]]
