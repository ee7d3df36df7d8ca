"""Where a result came from: time, code version, package versions, host, file fingerprints.

Shared by the evaluator's run.json and the training run folder (common is the package every
other one may import). Nothing here imports torch or transformers: versions are read from
the installed distributions' metadata. ``file_sha256`` is the project's one file hash (the
benchmark file in run.json, a checkpoint, an exported tower, the feature cache's keys).
"""
from __future__ import annotations

import hashlib
import platform
import socket
import subprocess
import time
from importlib import metadata
from pathlib import Path

PACKAGES = {"torch": "torch", "transformers": "transformers", "open_clip": "open_clip_torch",
            "lightning": "lightning", "crossview-baseline": "crossview-baseline"}
CODE_ROOT = Path(__file__).resolve().parents[1]


def file_sha256(path: str | Path) -> str:
    """The SHA-256 (hex) of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string (seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def git_state(root: str | Path = CODE_ROOT) -> dict | None:
    """{"commit": sha, "dirty": bool} of the code's checkout; None outside git (or without git)."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        if commit.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def package_versions() -> dict[str, str | None]:
    """Python and the versions of the packages a result depends on (None: not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name, dist in PACKAGES.items():
        try:
            out[name] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def environment() -> dict:
    """git, versions and host in one dict (run.json / the training run folder)."""
    return {"git": git_state(), "versions": package_versions(), "host": socket.gethostname()}
