"""Height fields (mjx_lite.compiler.hfield, .png) against MuJoCo 4.0 on the same inputs."""

from __future__ import annotations

import pathlib
import struct
import zlib

import mujoco
import numpy as np
import pytest

from mjx_lite.compiler.hfield import (
    compile_hfield,
    hfield_geom_aabb,
    hfield_geom_size,
    read_hfield_file,
)
from mjx_lite.compiler.png import decode_gray8, decode_png
from mjx_lite.errors import MJCFError

from conftest import MJX_TEST_DATA
from parity import assert_close, rel_error

RTOL = 1e-6
SIZE = (1.5, 0.8, 0.4, 0.1)
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def _chunk(ctype: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(ctype + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", crc)


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def encode_png(img, depth=8, ctype=0, filters=(0,), palette=None, interlace=0) -> bytes:
    """A test-only PNG writer: any colour type and depth, row filters cycling through `filters`."""
    img = np.asarray(img)
    h, w = img.shape[:2]
    ch = _CHANNELS[ctype]
    img = img.reshape(h, w, ch)
    if depth == 16:
        rows = img.astype(">u2").reshape(h, -1).view(np.uint8).reshape(h, -1)
    elif depth == 8:
        rows = img.astype(np.uint8).reshape(h, -1)
    else:
        per = 8 // depth
        rows = np.zeros((h, (w * depth + 7) // 8), np.uint8)
        for r in range(h):
            for c in range(w):
                rows[r, c // per] |= int(img[r, c, 0]) << (8 - depth * (c % per + 1))
    bpp = max(1, ch * depth // 8)
    raw = b""
    prev = np.zeros(rows.shape[1], np.int64)
    for r in range(h):
        f = filters[r % len(filters)]
        cur = rows[r].astype(np.int64)
        enc = np.zeros_like(cur)
        for i in range(len(cur)):
            a = cur[i - bpp] if i >= bpp else 0
            c = prev[i - bpp] if i >= bpp else 0
            pred = (0, a, prev[i], (a + prev[i]) // 2, _paeth(a, prev[i], c))[f]
            enc[i] = (cur[i] - pred) & 0xFF
        raw += bytes([f]) + enc.astype(np.uint8).tobytes()
        prev = cur
    head = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace)
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", head)
    if palette is not None:
        out += _chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes())
    return out + _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b"")


def _mj(hfield_attrs: str, assets: dict | None = None) -> mujoco.MjModel:
    xml = f"""<mujoco><asset><hfield name="h" size="{" ".join(map(str, SIZE))}" {hfield_attrs}/>
      </asset><worldbody><geom type="hfield" hfield="h"/></worldbody></mujoco>"""
    return mujoco.MjModel.from_xml_string(xml, assets or {})


def _compare(m: mujoco.MjModel, res) -> None:
    assert (res.nrow, res.ncol) == (m.hfield_nrow[0], m.hfield_ncol[0])
    assert_close("geom_size", hfield_geom_size(res.size), m.geom_size[0], RTOL)
    assert_close("geom_aabb", hfield_geom_aabb(res.size), m.geom_aabb[0], RTOL)
    assert res.data.dtype == np.float32
    assert_close("hfield_data", res.data, m.hfield_data, RTOL)
    assert_close("hfield_size", res.size, m.hfield_size[0], 0)


def _ours_file(data: bytes, fname: str, content_type: str | None = None):
    nrow, ncol, elev = read_hfield_file(data, fname, content_type, fname)
    return compile_hfield(nrow, ncol, elev, SIZE, fname, from_file=True)


RNG = np.random.default_rng(0)
PNG_CASES = {
    "gray8": (RNG.integers(0, 256, (5, 7)), 8, 0, None),
    "gray16": (RNG.integers(0, 65536, (6, 4)), 16, 0, None),
    "gray4": (RNG.integers(0, 16, (5, 9)), 4, 0, None),
    "gray2": (RNG.integers(0, 4, (3, 11)), 2, 0, None),
    "gray1": (RNG.integers(0, 2, (4, 13)), 1, 0, None),
    "rgb8": (RNG.integers(0, 256, (5, 6, 3)), 8, 2, None),
    "rgb16": (RNG.integers(0, 65536, (4, 5, 3)), 16, 2, None),
    "rgba8": (RNG.integers(0, 256, (5, 6, 4)), 8, 6, None),
    "gray_alpha8": (RNG.integers(0, 256, (5, 6, 2)), 8, 4, None),
    "palette": (RNG.integers(0, 5, (6, 5)), 8, 3, RNG.integers(0, 256, (5, 3))),
    "palette4": (RNG.integers(0, 5, (6, 7)), 4, 3, RNG.integers(0, 256, (5, 3))),
}
FILTERS = {
    "none": (0,),
    "sub": (1,),
    "up": (2,),
    "average": (3,),
    "paeth": (4,),
    "all": (0, 1, 2, 3, 4),
}


@pytest.mark.parametrize("filters", list(FILTERS))
@pytest.mark.parametrize("case", list(PNG_CASES))
def test_png_matches_mujoco(case, filters):
    img, depth, ctype, palette = PNG_CASES[case]
    png = encode_png(img, depth, ctype, FILTERS[filters], palette)
    _compare(_mj('file="h.png"', {"h.png": png}), _ours_file(png, "h.png"))


def test_png_rows_are_flipped_and_colour_keeps_red():
    img = np.zeros((3, 2, 3), np.uint8)
    img[0, :, 0] = 200  # top row: red only (a luminance average would give ~60)
    img[2, :, 1] = 255  # bottom row: green only -> 0 in MuJoCo's grey
    gray = decode_gray8(encode_png(img, 8, 2), "t")
    np.testing.assert_array_equal(gray, [[200, 200], [0, 0], [0, 0]])
    nrow, ncol, elev = read_hfield_file(encode_png(img, 8, 2), "h.png", None, "t")
    assert (nrow, ncol) == (3, 2)
    np.testing.assert_array_equal(elev, [0, 0, 0, 0, 200, 200])


def test_decode_png_samples_and_depths():
    img = RNG.integers(0, 65536, (3, 4))
    samples, depth, ctype, palette = decode_png(encode_png(img, 16, 0, (4,)), "t")
    assert (depth, ctype, palette) == (16, 0, None)
    np.testing.assert_array_equal(samples[:, :, 0], img)


def test_binary_matches_mujoco():
    elev = RNG.normal(size=(4, 6)).astype(np.float32)
    data = np.array([4, 6], "<i4").tobytes() + elev.astype("<f4").tobytes()
    m = _mj('file="h.bin"', {"h.bin": data})
    res = _ours_file(data, "h.bin")
    _compare(m, res)
    # the binary format is stored as written (row 0 first), unlike PNG and elevation
    np.testing.assert_array_equal(res.data.reshape(4, 6).argmax(), elev.argmax())


def test_content_type_overrides_extension():
    png = encode_png(RNG.integers(0, 256, (4, 5)), 8, 0)
    m = _mj('file="h.dat" content_type="image/png"', {"h.dat": png})
    _compare(m, _ours_file(png, "h.dat", "image/png"))
    elev = np.arange(6, dtype="<f4")
    data = np.array([2, 3], "<i4").tobytes() + elev.tobytes()
    m = _mj('file="h.png" content_type="image/vnd.mujoco.hfield"', {"h.png": data})
    _compare(m, _ours_file(data, "h.png", "image/vnd.mujoco.hfield"))


def test_file_dimensions_override_nrow_ncol():
    # MuJoCo 4.0 accepts nrow/ncol next to a file and uses the file's (3.x: an error)
    elev = np.arange(6, dtype="<f4")
    data = np.array([2, 3], "<i4").tobytes() + elev.tobytes()
    m = _mj('file="h.bin" nrow="5" ncol="5"', {"h.bin": data})
    _compare(m, _ours_file(data, "h.bin"))


def test_inline_elevation_matches_mujoco():
    elev = [1, 2, 3, 4, 5, 7, 0.5, -2, 3]
    m = _mj(f'nrow="3" ncol="3" elevation="{" ".join(map(str, elev))}"')
    res = compile_hfield(3, 3, elev, SIZE, "h")
    _compare(m, res)
    # the attribute lists the top row first; MuJoCo stores rows bottom-up
    np.testing.assert_allclose(res.data[:3], (np.array([0.5, -2, 3]) + 2) / 9, rtol=1e-6)


def test_constant_and_missing_elevation():
    m = _mj('nrow="2" ncol="3" elevation="3 3 3 3 3 3"')
    _compare(m, compile_hfield(2, 3, [3] * 6, SIZE, "h"))
    m = _mj('nrow="4" ncol="2"')
    _compare(m, compile_hfield(4, 2, None, SIZE, "h"))


def test_errors():
    with pytest.raises(ValueError):
        _mj('nrow="2" ncol="2" elevation="1 2 3"')
    with pytest.raises(MJCFError, match="expected nrow"):
        compile_hfield(2, 2, [1, 2, 3], SIZE, "h")
    with pytest.raises(ValueError, match="at least 2"):
        _mj('nrow="3" ncol="1"')
    with pytest.raises(MJCFError, match="at least 2"):
        compile_hfield(3, 1, None, SIZE, "h")
    with pytest.raises(MJCFError, match="not positive"):
        compile_hfield(2, 2, None, (1, 1, 1, 0), "h")
    with pytest.raises(MJCFError, match="not specified"):
        compile_hfield(0, 0, None, SIZE, "h")
    data = np.array([2, 3], "<i4").tobytes() + np.zeros(5, "<f4").tobytes()
    with pytest.raises(ValueError, match="unexpected file size"):
        _mj('file="h.bin"', {"h.bin": data})
    with pytest.raises(MJCFError, match="unexpected file size"):
        read_hfield_file(data, "h.bin", None, "h")
    png = bytearray(encode_png(RNG.integers(0, 256, (4, 4)), 8, 0))
    png[40] ^= 0xFF  # inside the IDAT chunk: the CRC no longer matches
    with pytest.raises(MJCFError, match="CRC"):
        read_hfield_file(bytes(png), "h.png", None, "h")
    with pytest.raises(MJCFError, match="interlaced"):
        read_hfield_file(encode_png(np.zeros((4, 4)), interlace=1), "h.png", None, "h")
    with pytest.raises(MJCFError, match="signature"):
        read_hfield_file(b"not a png", "h.png", None, "h")


@pytest.mark.acceptance
def test_wheel_pngs_as_height_fields():
    """Real PNG files from the mujoco-mjx wheel's test data, loaded as height fields."""
    lines, failures = [], []
    for path in sorted(MJX_TEST_DATA.rglob("*.png")):
        data = path.read_bytes()
        m = _mj('file="h.png"', {"h.png": data})
        res = _ours_file(data, "h.png")
        err = rel_error(res.data, m.hfield_data) if res.data.shape == m.hfield_data.shape else 1.0
        dims = (res.nrow, res.ncol) == (m.hfield_nrow[0], m.hfield_ncol[0])
        lines.append(
            f"{path.relative_to(MJX_TEST_DATA)}: hfield_data worst relative error "
            f"{err:.3g}, nrow/ncol {'equal' if dims else 'DIFFER'}"
        )
        if err > RTOL or not dims:
            failures.append(lines[-1])
    out = pathlib.Path(__file__).parent / "acceptance" / "hfield.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    assert not failures, "\n".join(failures)
