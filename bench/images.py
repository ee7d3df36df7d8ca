"""Image integrity: every image decoded in full and hashed, once, cached by size and mtime.

``inspect_images`` reads each file once, hashes its bytes (SHA-256) and decodes every pixel
(``Image.verify`` only checks chunk checksums, so a PNG with valid checksums and corrupt
pixel data passes it). Files are inspected on a thread pool (zlib and PIL's decoders release
the GIL). Results of images that decode are cached on disk, keyed by path, size and mtime,
so a second validation or run over the same benchmark reads nothing again; a broken image
is never cached and is checked again next time.

Cache: ``$CROSSVIEW_CACHE_DIR/image-index/`` (default ``~/.cache/crossview-baseline``), one
JSON file per image folder root. Failing to write it only costs the next run a re-read.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from common.atomic import atomic_write_json

log = logging.getLogger(__name__)
_MEMO: dict[str, tuple[int, int, str]] = {}  # abs path -> (size, mtime_ns, sha256) of decodable images
_MEMO_LOCK = threading.Lock()
_LOADED_ROOTS: set[str] = set()


@dataclass(frozen=True)
class ImageInfo:
    sha256: str | None  # None when the file cannot be read
    error: str | None  # None when every pixel decodes


def cache_dir() -> Path:
    base = os.environ.get("CROSSVIEW_CACHE_DIR") or Path.home() / ".cache" / "crossview-baseline"
    return Path(base) / "image-index"


def _index_file(root: Path) -> Path:
    return cache_dir() / f"{hashlib.sha256(str(root).encode()).hexdigest()[:16]}.json"


def _load_index(root: Path) -> None:
    key = str(root)
    if key in _LOADED_ROOTS:
        return
    _LOADED_ROOTS.add(key)
    try:
        data = json.loads(_index_file(root).read_bytes())
        entries = {p: tuple(v) for p, v in data.get("images", {}).items() if isinstance(v, list) and len(v) == 3}
    except (OSError, ValueError, AttributeError):
        return
    with _MEMO_LOCK:
        for path, value in entries.items():
            _MEMO.setdefault(path, value)  # type: ignore[arg-type]


def _save_index(root: Path) -> None:
    prefix = str(root) + os.sep
    with _MEMO_LOCK:
        entries = {p: list(v) for p, v in _MEMO.items() if p.startswith(prefix)}
    try:
        _index_file(root).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(_index_file(root), {"root": str(root), "images": entries}, indent=None)
    except OSError as err:
        log.debug("image index not saved (%s); the next run reads the images again", err)


def _decode_error(data: bytes) -> str | None:
    from PIL import Image
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()  # every pixel: catches corrupt image data behind valid checksums
    except Exception as err:  # PIL raises many types for a broken file
        return f"{type(err).__name__}: {err}"
    return None


def _inspect(path: str, decode: bool) -> tuple[str, ImageInfo, tuple[int, int] | None]:
    try:
        stat = os.stat(path)
        with _MEMO_LOCK:
            known = _MEMO.get(path)
        if known is not None and known[:2] == (stat.st_size, stat.st_mtime_ns):
            return path, ImageInfo(known[2], None), None
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        return path, ImageInfo(None, f"cannot read: {err.strerror or err}"), None
    digest = hashlib.sha256(data).hexdigest()
    error = _decode_error(data) if decode else None
    return path, ImageInfo(digest, error), (stat.st_size, stat.st_mtime_ns) if error is None and decode else None


def inspect_images(paths: Iterable[str | Path], root: str | Path | None = None, decode: bool = True,
                   workers: int | None = None) -> dict[str, ImageInfo]:
    """SHA-256 and full-decode result of every file, by absolute path.

    Args:
        paths: image files (duplicates are inspected once).
        root: the folder whose on-disk index caches the results (the benchmark folder);
            None keeps them in memory only.
        decode: decode the pixels too (False: hash only; nothing is cached then).
        workers: threads; default min(8, CPUs).
    """
    unique = list(dict.fromkeys(str(Path(p).absolute()) for p in paths))
    if root is not None:
        root = Path(root).resolve()
        _load_index(root)
    workers = workers or min(8, os.cpu_count() or 1)
    if len(unique) < 4 or workers == 1:
        results = [_inspect(p, decode) for p in unique]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(lambda p: _inspect(p, decode), unique, chunksize=16))
    fresh = 0
    with _MEMO_LOCK:
        for path, info, stamp in results:
            if stamp is not None:
                _MEMO[path] = (*stamp, info.sha256)
                fresh += 1
    if fresh and root is not None:
        _save_index(root)
    return {path: info for path, info, _ in results}


def images_digest(hashes: Iterable[tuple[str, str]]) -> str:
    """One SHA-256 over (name, content hash) pairs, order-free: the identity of a set of images."""
    h = hashlib.sha256()
    for name, digest in sorted(set(hashes)):
        h.update(f"{name}\t{digest}\n".encode())
    return h.hexdigest()
