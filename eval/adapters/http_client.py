"""The HTTP side of the endpoint adapters: keep-alive connections, no redirects, no leaks.

- ``post_json`` sends one POST over a kept-alive connection of the calling thread (one per
  worker thread) and returns the status, headers and body. It never follows a redirect: a
  3xx comes back to the caller like any other status, so the key is only ever sent to the
  configured origin.
- ``redact`` removes secrets (the key itself, anything that looks like a bearer token or an
  API key) from a text before it is printed, logged or stored.
- ``retry_after_seconds`` reads Retry-After as seconds or as an HTTP date.
Standard library only (http.client).
"""
from __future__ import annotations

import email.utils
import http.client
import re
import socket
import threading
import time
from typing import Iterable
from urllib.parse import urlsplit

REDACTED = "[REDACTED]"
_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[^\s\"',;}\]]+"),
    re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization|access[_-]?token|secret|password)"
               r"[\"']?\s*[:=]\s*[\"']?)(?!bearer\s)[^\s\"',;}\]]+"),
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),
]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each secret, bearer token and API-key-looking value replaced by [REDACTED].

    A secret cut off at the end of the text (an error body shortened mid-key) is removed too.
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
            for n in range(len(secret) - 1, 3, -1):  # a prefix of the key at the very end
                if text.endswith(secret[:n]):
                    text = text[: -n] + REDACTED
                    break
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as a number of seconds ("120") or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Response:
    """Status, headers (lower-case names) and body of one HTTP exchange."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body


class KeepAliveClient:
    """POSTs to one origin, reusing one persistent connection per calling thread.

    Args:
        url: the full URL requests go to (its origin is the only one ever contacted).
        timeout: seconds per connect / read.
    """

    RETRYABLE = (http.client.HTTPException, socket.timeout, ConnectionError, OSError)
    STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)

    def __init__(self, url: str, timeout: float):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r}: expected an http(s) URL")
        self.url, self.timeout = url, timeout
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.connections_opened = 0

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
                self.connections_opened += 1
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def post(self, body: bytes, headers: dict[str, str]) -> Response:
        """One POST; raises http.client / socket errors on a broken exchange (worth a retry).

        A kept-alive connection the server has closed while idle is reopened once."""
        for attempt in (0, 1):
            conn = self._connection()
            reused = getattr(conn, "sock", None) is not None
            try:
                conn.request("POST", self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
            except self.STALE:
                self._drop()
                if attempt == 0 and reused:
                    continue  # the server closed the idle keep-alive connection: open a fresh one
                raise
            except self.RETRYABLE:
                self._drop()
                raise
            if reply.will_close:
                self._drop()
            return Response(reply.status, {k.lower(): v for k, v in reply.getheaders()}, data)
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
