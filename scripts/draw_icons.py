"""Draw the app icons (static/icons/): the same figure as icon.svg, rasterised with numpy.

Four ranks (white dots on the corners of a square) joined by lines to the point where they meet
(the rendezvous) on the site's accent blue. `purpose: maskable` icons keep the figure inside the
central 80% safe zone, so the same drawing serves both purposes.
Usage: python scripts/draw_icons.py   (rewrites static/icons/icon-{192,512}.png)
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "static" / "icons"
BLUE = (11, 92, 173)
WHITE = (255, 255, 255)
SUPERSAMPLE = 4
# The figure in a 100x100 box, as in icon.svg.
RANKS = ((30.0, 30.0), (70.0, 30.0), (30.0, 70.0), (70.0, 70.0))
CENTRE = (50.0, 50.0)
RANK_RADIUS = 8.0
CENTRE_RADIUS = 11.0
LINE_HALF_WIDTH = 3.0


def _segment_distance(x: np.ndarray, y: np.ndarray, a: tuple[float, float]) -> np.ndarray:
    ax, ay = a
    bx, by = CENTRE
    dx, dy = bx - ax, by - ay
    t = np.clip(((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy), 0.0, 1.0)
    return np.hypot(x - (ax + t * dx), y - (ay + t * dy))


def coverage(size: int) -> np.ndarray:
    """How much of each pixel the white figure covers (0..1)."""
    n = size * SUPERSAMPLE
    grid = (np.arange(n) + 0.5) * (100.0 / n)
    x, y = np.meshgrid(grid, grid)
    white = np.hypot(x - CENTRE[0], y - CENTRE[1]) <= CENTRE_RADIUS
    for rank in RANKS:
        white |= np.hypot(x - rank[0], y - rank[1]) <= RANK_RADIUS
        white |= _segment_distance(x, y, rank) <= LINE_HALF_WIDTH
    return white.reshape(size, SUPERSAMPLE, size, SUPERSAMPLE).mean(axis=(1, 3))


def png(size: int) -> bytes:
    cover = coverage(size)[..., None]
    rgb = np.array(BLUE) * (1 - cover) + np.array(WHITE) * cover
    rows = np.round(rgb).astype(np.uint8).reshape(size, size * 3)
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for size in (192, 512):
        (OUT / f"icon-{size}.png").write_bytes(png(size))


if __name__ == "__main__":
    main()
