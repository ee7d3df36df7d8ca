"""The backbone feature cache: every unique image is encoded once, ever.

Entries are keyed by the backbone identity (architecture, weights digest, image size, layer)
and the SHA-256 of the image bytes, so a changed image or a changed backbone gets a new key
and can never be served stale features. Each entry is one safetensors file that stores the
key it was written for and a checksum of its tensor bytes. An entry that fails to load,
names another key, has another shape or dtype than the backbone produces, or whose bytes do
not match its checksum (a flipped bit) is treated as missing and rebuilt, with a warning.
Files are written to a temporary name and renamed, so an interrupted build leaves no
half-written entry.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence

import numpy as np
import torch
from PIL import Image
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from tqdm.auto import tqdm

from common.atomic import atomic_target
from common.provenance import file_sha256

log = logging.getLogger(__name__)


class ImageEncoder(Protocol):
    """What the cache needs of a backbone (model.backbone.FrozenClipBackbone fits): an
    ``identity`` string, ``cfg.image_size`` / ``cfg.mean`` / ``cfg.std``, and a call."""
    identity: str
    cfg: Any

    def __call__(self, images: torch.Tensor) -> dict[str, torch.Tensor]: ...


def load_image_tensor(path: str | Path, size: int, mean, std) -> torch.Tensor:
    """(3, size, size) float tensor, resized (bicubic) and normalised like the backbone expects."""
    with Image.open(path) as img:
        img = img.convert("RGB")
        if img.size != (size, size):
            img = img.resize((size, size), Image.BICUBIC)
        arr = np.asarray(img, dtype=np.float32) / 255.0
    x = torch.from_numpy(arr).permute(2, 0, 1)
    return (x - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)


def _checksum(patch_tokens: torch.Tensor, pooled: torch.Tensor) -> bytes:
    """A 16-byte BLAKE2b of the tensors' bytes: catches flipped bits the file format does not."""
    h = hashlib.blake2b(digest_size=16)
    for tensor in (patch_tokens, pooled):
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.digest()


def image_hw(path: str) -> tuple[int, int]:
    """(height, width) of an image file, from its header."""
    with Image.open(path) as img:  # reads the header only
        return img.height, img.width


@dataclass
class FeatureTable:
    """Features of a set of images, stacked: row ``index[path]`` belongs to that image."""
    patch_tokens: torch.Tensor  # (N, P, C) float16
    pooled: torch.Tensor  # (N, C) float16
    index: dict[str, int]  # absolute image path -> row
    sizes: dict[str, tuple[int, int]]  # absolute image path -> (height, width) in pixels


class FeatureCache:
    """Disk cache of backbone features keyed by (backbone identity, image content hash).

    Args:
        root: cache folder (e.g. data/cache); entries go to ``root/<identity digest>/``.
        encoder: the frozen backbone.
        batch_size: images per forward pass while building.
    """

    def __init__(self, root: str | Path, encoder: ImageEncoder, batch_size: int = 64):
        self.encoder = encoder
        self.identity = encoder.identity
        self.dir = Path(root) / hashlib.sha256(self.identity.encode()).hexdigest()[:16]
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "IDENTITY").write_text(self.identity + "\n")
        self.batch_size = batch_size
        self._hash_memo: dict[tuple[str, int, int], str] = {}
        self.n_encoded = 0  # images encoded by this instance (for the benchmarks and tests)
        self._shapes: dict[str, tuple[int, ...]] | None = None

    def _content_hash(self, path: Path) -> str:
        # Hashing is cheap next to encoding, but a memo keyed by mtime and size avoids
        # re-reading thousands of files each time a split is loaded in one process.
        stat = path.stat()
        memo_key = (str(path), stat.st_mtime_ns, stat.st_size)
        if memo_key not in self._hash_memo:
            self._hash_memo[memo_key] = file_sha256(path)
        return self._hash_memo[memo_key]

    def _entry_path(self, content_hash: str) -> Path:
        return self.dir / content_hash[:2] / f"{content_hash}.safetensors"

    @torch.no_grad()
    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Per-image shapes the backbone produces (one forward pass of a blank image, once)."""
        if self._shapes is None:
            size = self.encoder.cfg.image_size
            out = self.encoder(torch.zeros(1, 3, size, size))
            self._shapes = {name: tuple(out[name].shape[1:]) for name in ("patch_tokens", "pooled")}
        return self._shapes

    def _read(self, content_hash: str) -> dict[str, torch.Tensor] | None:
        path = self._entry_path(content_hash)
        if not path.is_file():
            return None
        try:
            entry = load_file(str(path))
            key = bytes(entry.pop("key").tolist()).decode()
            stored_sum = bytes(entry.pop("checksum").tolist()) if "checksum" in entry else None
        except (SafetensorError, OSError, KeyError, UnicodeDecodeError, RuntimeError, ValueError):
            log.warning("feature cache: corrupt entry %s, rebuilding it", path)
            return None
        if key != f"{self.identity}|{content_hash}" or set(entry) != {"patch_tokens", "pooled"}:
            log.warning("feature cache: entry %s belongs to another key, rebuilding it", path)
            return None
        shapes = self.expected_shapes()
        for name, tensor in entry.items():
            if tensor.dtype != torch.float16 or tuple(tensor.shape) != shapes[name]:
                log.warning("feature cache: entry %s holds %s %s %s, the backbone gives float16 %s; rebuilding it",
                            path, name, str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape), shapes[name])
                return None
        if stored_sum is None or stored_sum != _checksum(entry["patch_tokens"], entry["pooled"]):
            why = "has no checksum (an older cache)" if stored_sum is None else "fails its checksum"
            log.warning("feature cache: entry %s %s, rebuilding it", path, why)
            return None
        return entry

    def _write(self, content_hash: str, patch_tokens: torch.Tensor, pooled: torch.Tensor) -> None:
        path = self._entry_path(content_hash)
        path.parent.mkdir(parents=True, exist_ok=True)
        key = torch.tensor(list(f"{self.identity}|{content_hash}".encode()), dtype=torch.uint8)
        patch_tokens, pooled = patch_tokens.to(torch.float16).contiguous(), pooled.to(torch.float16).contiguous()
        checksum = torch.tensor(list(_checksum(patch_tokens, pooled)), dtype=torch.uint8)
        with atomic_target(path, durable=False) as tmp:  # a cache entry can be rebuilt
            save_file({"patch_tokens": patch_tokens, "pooled": pooled, "key": key, "checksum": checksum}, str(tmp))

    @torch.no_grad()
    def _encode(self, paths: list[Path]) -> dict[str, torch.Tensor]:
        cfg = self.encoder.cfg
        images = torch.stack([load_image_tensor(p, cfg.image_size, cfg.mean, cfg.std) for p in paths])
        self.n_encoded += len(paths)
        return self.encoder(images)

    def table(self, image_paths: Iterable[str | Path], desc: str = "encoding images") -> FeatureTable:
        """Features for ``image_paths`` (deduplicated), encoding only what the cache lacks."""
        unique = list(dict.fromkeys(str(Path(p).resolve()) for p in image_paths))
        hashes = [self._content_hash(Path(p)) for p in unique]
        entries: dict[str, dict[str, torch.Tensor]] = {}
        missing: list[tuple[str, str]] = []
        for path, digest in zip(unique, hashes):
            if digest in entries:
                continue
            entry = self._read(digest)
            if entry is None:
                missing.append((path, digest))
                entries[digest] = {}  # placeholder: one encode per distinct content
            else:
                entries[digest] = entry
        if missing:
            bar = tqdm(total=len(missing), desc=desc, unit="img", disable=None)
            for start in range(0, len(missing), self.batch_size):
                chunk = missing[start:start + self.batch_size]
                out = self._encode([Path(p) for p, _ in chunk])
                for row, (_, digest) in enumerate(chunk):
                    self._write(digest, out["patch_tokens"][row], out["pooled"][row])
                    entries[digest] = {"patch_tokens": out["patch_tokens"][row].to(torch.float16),
                                       "pooled": out["pooled"][row].to(torch.float16)}
                bar.update(len(chunk))
            bar.close()
        if not unique:
            raise ValueError("no images to encode")
        order = list(dict.fromkeys(hashes))
        row_of = {d: i for i, d in enumerate(order)}
        return FeatureTable(
            patch_tokens=torch.stack([entries[d]["patch_tokens"] for d in order]),
            pooled=torch.stack([entries[d]["pooled"] for d in order]),
            index={p: row_of[d] for p, d in zip(unique, hashes)},
            sizes={p: image_hw(p) for p in unique},
        )


@torch.no_grad()
def fill_together(caches: Sequence[FeatureCache], image_paths: Iterable[str | Path],
                  desc: str = "encoding images") -> int:
    """Encode the images that any of ``caches`` lacks with ONE pass of their shared tower per batch
    (``model.backbone.encode_levels``: the caches' encoders wrap one tower at different levels),
    writing each cache's entry; afterwards ``cache.table`` of each finds them all. Returns how
    many images were encoded."""
    from model.backbone import encode_levels
    first = caches[0]
    for cache in caches[1:]:
        cache._hash_memo = first._hash_memo  # hash each image file once
    unique = list(dict.fromkeys(str(Path(p).resolve()) for p in image_paths))
    todo = {}
    for path in unique:
        digest = first._content_hash(Path(path))
        if digest not in todo and any(not c._entry_path(digest).is_file() for c in caches):
            todo[digest] = path
    missing = [(p, d) for d, p in todo.items()]
    bar = tqdm(total=len(missing), desc=desc, unit="img", disable=None if missing else True)
    cfg = first.encoder.cfg
    for start in range(0, len(missing), first.batch_size):
        chunk = missing[start:start + first.batch_size]
        images = torch.stack([load_image_tensor(p, cfg.image_size, cfg.mean, cfg.std) for p, _ in chunk])
        for cache, out in zip(caches, encode_levels([c.encoder for c in caches], images)):
            cache.n_encoded += len(chunk)
            for row, (_, digest) in enumerate(chunk):
                cache._write(digest, out["patch_tokens"][row], out["pooled"][row])
        bar.update(len(chunk))
    bar.close()
    return len(missing)
