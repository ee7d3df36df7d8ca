"""`bench validate` decodes every image: a PNG whose chunks all have valid checksums but whose
pixel data is corrupt is reported (sample, field, file), and a run refuses it before OUT exists."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

from bench.__main__ import main as bench_main
from eval.__main__ import main as eval_main


def png_with_corrupt_pixels(path: Path, size: int = 32) -> None:
    """Valid signature, IHDR, IDAT and IEND with correct CRCs; the scanlines use filter type 9
    (there are five, 0-4), so only a full decode notices."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x09" + bytes(3 * size) for _ in range(size))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def test_verify_alone_would_pass_it(tmp_path):
    from PIL import Image
    png_with_corrupt_pixels(tmp_path / "x.png")
    with Image.open(tmp_path / "x.png") as img:
        img.verify()  # checksums are fine: this is what the old validation did


def test_validate_decodes_pixels_and_names_sample_and_file(tiny_bench, tmp_path, capsys):
    rel = "images/s001/cam2_000.png"
    png_with_corrupt_pixels(tiny_bench / rel)
    assert bench_main(["validate", str(tiny_bench)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out and all(rel in line for line in out)
    assert any(":s001-svs:" in line and "views[2].frames[0].image" in line for line in out), out
    code = eval_main(["run", "--bench", str(tiny_bench), "--model", "oracle", "--out", str(tmp_path / "o"),
                      "--no-progress"])
    assert code == 1 and not (tmp_path / "o").exists()
    assert rel in capsys.readouterr().err


def test_validate_stays_clean_on_good_images(tiny_bench, capsys):
    assert bench_main(["validate", str(tiny_bench)]) == 0
