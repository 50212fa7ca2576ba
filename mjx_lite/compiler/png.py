"""A small PNG decoder (zlib + numpy) for height-field assets.

MuJoCo decodes PNG height fields with lodepng, asking for 8-bit grayscale (MJCF reference,
asset/hfield: "The image is converted internally to gray scale"). `decode_gray8` reproduces that
conversion: colour images keep the red channel (lodepng's RGB -> grey rule, not a luminance
average), 16-bit samples keep their high byte, and sub-byte grey depths are stretched to 0..255.
Non-interlaced images with any of the five row filters are supported; Adam7-interlaced images are
rejected with an MJCFError.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from mjx_lite.errors import MJCFError

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# channels per colour type (PNG spec, IHDR): grey, RGB, palette, grey+alpha, RGBA
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}


def _chunks(data: bytes, where: str):
    pos = len(_SIGNATURE)
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        end = pos + 12 + length
        if end > len(data):
            raise MJCFError(f"{where} PNG chunk {ctype!r} runs past the end of the file")
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : end])
        if zlib.crc32(ctype + body) & 0xFFFFFFFF != crc:
            raise MJCFError(f"{where} PNG chunk {ctype!r} has a bad CRC")
        yield ctype, body
        if ctype == b"IEND":
            return
        pos = end
    raise MJCFError(f"{where} PNG file has no IEND chunk")


def _paeth_row(cur: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    # Paeth and Average depend on the already-decoded byte to the left, so they run per byte;
    # plain Python ints on lists are several times faster than numpy scalars here.
    out = cur.tolist()
    up = prev.tolist()
    for i in range(len(out)):
        b = up[i]
        if i >= bpp:
            a, c = out[i - bpp], up[i - bpp]
        else:
            a = c = 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        out[i] = (out[i] + (a if pa <= pb and pa <= pc else (b if pb <= pc else c))) & 0xFF
    return np.array(out, np.uint8)


def _average_row(cur: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    out = cur.tolist()
    up = prev.tolist()
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        out[i] = (out[i] + ((a + up[i]) >> 1)) & 0xFF
    return np.array(out, np.uint8)


def _unfilter(raw: bytes, height: int, stride: int, bpp: int, where: str) -> np.ndarray:
    if len(raw) != height * (stride + 1):
        raise MJCFError(
            f"{where} PNG image data has {len(raw)} bytes, expected {height * (stride + 1)}"
        )
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.uint8)
    for r in range(height):
        ftype = int(rows[r, 0])
        cur = rows[r, 1:].copy()
        if ftype == 1:  # Sub: running sum per byte lane, modulo 256
            pad = (-stride) % bpp
            lanes = np.concatenate([cur, np.zeros(pad, np.uint8)]).reshape(-1, bpp)
            cur = np.cumsum(lanes, axis=0, dtype=np.uint8).reshape(-1)[:stride]
        elif ftype == 2:  # Up
            cur = cur + prev
        elif ftype == 3:
            cur = _average_row(cur, prev, bpp)
        elif ftype == 4:
            cur = _paeth_row(cur, prev, bpp)
        elif ftype != 0:
            raise MJCFError(f"{where} PNG row {r} has unknown filter type {ftype}")
        out[r] = cur
        prev = cur
    return out


def decode_png(data: bytes, where: str) -> tuple[np.ndarray, int, int, np.ndarray | None]:
    """Decodes a non-interlaced PNG.

    Returns:
      samples: (height, width, channels) uint8 or uint16 (sub-byte depths unpacked to uint8).
      bitdepth: bits per sample in the file.
      colortype: PNG colour type (0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA).
      palette: (n, 3) uint8 for colour type 3, else None.
    """
    if not data.startswith(_SIGNATURE):
        raise MJCFError(f"{where} not a PNG file (bad signature)")
    header = None
    palette = None
    idat = []
    for ctype, body in _chunks(data, where):
        if ctype == b"IHDR":
            header = struct.unpack(">IIBBBBB", body[:13])
        elif ctype == b"PLTE":
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif ctype == b"IDAT":
            idat.append(body)
    if header is None:
        raise MJCFError(f"{where} PNG file has no IHDR chunk")
    width, height, depth, ctype, comp, filt, interlace = header
    if width == 0 or height == 0:
        raise MJCFError(f"{where} PNG image has a zero dimension")
    if ctype not in _CHANNELS or depth not in _DEPTHS[ctype] or comp != 0 or filt != 0:
        raise MJCFError(f"{where} unsupported PNG format (colour type {ctype}, depth {depth})")
    if interlace:
        raise MJCFError(f"{where} interlaced (Adam7) PNG files are not supported")
    if ctype == 3 and palette is None:
        raise MJCFError(f"{where} palette PNG file has no PLTE chunk")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as e:
        raise MJCFError(f"{where} corrupt PNG image data: {e}") from None
    channels = _CHANNELS[ctype]
    bits = channels * depth
    stride = (width * bits + 7) // 8
    buf = _unfilter(raw, height, stride, max(1, bits // 8), where)
    if depth == 16:
        samples = buf.view(">u2").astype(np.uint16).reshape(height, width, channels)
    elif depth == 8:
        samples = buf.reshape(height, width, channels)
    else:
        per_byte = 8 // depth
        shifts = np.arange(8 - depth, -1, -depth, dtype=np.uint8)
        vals = (buf[:, :, None] >> shifts) & ((1 << depth) - 1)
        samples = vals.reshape(height, stride * per_byte)[:, :width, None].astype(np.uint8)
    return samples, depth, ctype, palette


def decode_gray8(data: bytes, where: str) -> np.ndarray:
    """Decodes a PNG to 8-bit grey the way lodepng does for MuJoCo: (height, width) uint8."""
    samples, depth, ctype, palette = decode_png(data, where)
    if ctype == 3:
        idx = samples[:, :, 0]
        if idx.max() >= len(palette):
            raise MJCFError(f"{where} PNG palette index out of range")
        return palette[idx, 0].copy()
    first = samples[:, :, 0]
    if depth == 16:
        return (first >> 8).astype(np.uint8)
    if depth < 8:
        return (first.astype(np.uint32) * 255 // ((1 << depth) - 1)).astype(np.uint8)
    return first.astype(np.uint8)
