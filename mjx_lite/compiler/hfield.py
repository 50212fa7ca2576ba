"""Height-field assets: file loading and elevation normalization (MJCF reference, asset/hfield)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from mjx_lite.compiler.png import decode_gray8
from mjx_lite.errors import MJCFError

_MINVAL = 1e-15  # mjMINVAL


@dataclasses.dataclass(frozen=True)
class HFieldResult:
    """One compiled height field, as MuJoCo stores it.

    Fields:
      size: (4,) float64 hfield_size = (radius_x, radius_y, elevation_z, base_z).
      nrow: hfield_nrow.
      ncol: hfield_ncol.
      data: (nrow*ncol,) float32 hfield_data, row-major, normalized to [0, 1].
    """

    size: np.ndarray
    nrow: int
    ncol: int
    data: np.ndarray


def _is_png(filename: str, content_type: str | None) -> bool:
    if content_type:
        return content_type.strip().lower() == "image/png"
    return os.path.splitext(filename)[1].lower() == ".png"


def read_hfield_file(
    data: bytes, filename: str, content_type: str | None, where: str
) -> tuple[int, int, np.ndarray]:
    """Reads a height-field file: PNG, or MuJoCo's binary format (asset/hfield).

    The content type, when given, wins over the file extension (asset element). A PNG is turned
    into grey as lodepng does and flipped vertically, so that row 0 of hfield_data is the bottom
    image row (the one at -y). The binary format is int32 nrow, int32 ncol, float32[nrow*ncol],
    row-major, little-endian.

    Returns:
      (nrow, ncol, elevation) with elevation a (nrow*ncol,) float32 array, not yet normalized.
    """
    if _is_png(filename, content_type):
        gray = decode_gray8(data, f"{where} hfield file '{filename}':")
        nrow, ncol = gray.shape
        return int(nrow), int(ncol), gray[::-1].reshape(-1).astype(np.float32)
    if content_type and content_type.strip().lower() != "image/vnd.mujoco.hfield":
        raise MJCFError(f"{where} unsupported hfield content type '{content_type}'")
    if len(data) < 8:
        raise MJCFError(f"{where} hfield file '{filename}' is missing its header")
    nrow, ncol = (int(v) for v in np.frombuffer(data[:8], "<i4"))
    if nrow < 1 or ncol < 1:
        raise MJCFError(f"{where} non-positive hfield dimensions in file '{filename}'")
    if len(data) != 8 + 4 * nrow * ncol:
        raise MJCFError(f"{where} unexpected file size in hfield file '{filename}'")
    return nrow, ncol, np.frombuffer(data[8:], "<f4").astype(np.float32)


def compile_hfield(
    nrow: int,
    ncol: int,
    elevation: np.ndarray | None,
    size,
    where: str,
    *,
    from_file: bool = False,
) -> HFieldResult:
    """Checks a height field and normalizes its elevation to [0, 1] (asset/hfield).

    Args:
      nrow, ncol: from read_hfield_file, or the nrow/ncol attributes. MuJoCo 4.0 lets file
        dimensions override non-zero nrow/ncol attributes without error (the 3.x seed calls that
        an error; 4.0 wins), so the builder should pass the file's values when there is a file.
        Both must be at least 2 (MuJoCo 4.0).
      elevation: (nrow*ncol,) values, or None for zeros. With from_file=False these are the
        elevation attribute in XML order, top row first, which MuJoCo 4.0 stores bottom row first
        (rows flipped, like a PNG image); with from_file=True they are read_hfield_file's output,
        already in storage order.
      size: (4,) the size attribute; all four entries must be positive.
      where: location prefix for error messages.

    Normalization runs in float32, as MuJoCo's does: subtract the minimum, then divide by
    (max - min) when that exceeds mjMINVAL; a constant field becomes all zeros.
    """
    size = np.asarray(size, np.float64).reshape(-1)
    if size.shape != (4,):
        raise MJCFError(f"{where} hfield size must have 4 values, got {size.size}")
    if np.any(size <= 0):
        raise MJCFError(f"{where} size parameter is not positive in hfield")
    nrow, ncol = int(nrow), int(ncol)
    if nrow < 1 or ncol < 1:
        raise MJCFError(f"{where} hfield not specified: give a file, or nrow and ncol")
    if nrow < 2 or ncol < 2:
        raise MJCFError(f"{where} hfield dimensions must be at least 2, got {nrow} x {ncol}")
    if elevation is None:
        data = np.zeros(nrow * ncol, np.float32)
    else:
        data = np.asarray(elevation, np.float32).reshape(-1)
        if data.size != nrow * ncol:
            raise MJCFError(
                f"{where} elevation has {data.size} values, expected nrow*ncol = {nrow * ncol}"
            )
        if not np.all(np.isfinite(data)):
            # MuJoCo 4.0 warns and stores NaN-polluted data; we refuse it instead.
            raise MJCFError(f"{where} hfield elevation data is not finite")
        if not from_file:
            data = data.reshape(nrow, ncol)[::-1].reshape(-1)
        emin, emax = data.min(), data.max()
        data = data - emin
        if emax - emin > _MINVAL:
            data = data / (emax - emin)
    return HFieldResult(size=size, nrow=nrow, ncol=ncol, data=data.astype(np.float32))


def hfield_geom_size(size) -> np.ndarray:
    """geom_size of a geom using this height field: (radius_x, radius_y, z) with
    z = elevation_z / 4 + base_z / 2, as MuJoCo 4.0 stores it (not elevation_z itself)."""
    s = np.asarray(size, np.float64).reshape(4)
    return np.array([s[0], s[1], 0.25 * s[2] + 0.5 * s[3]])


def hfield_geom_aabb(size) -> np.ndarray:
    """geom_aabb (centre, half-size) of a height-field geom: the box from -base_z to
    elevation_z over the field's rectangle."""
    s = np.asarray(size, np.float64).reshape(4)
    return np.array([0.0, 0.0, (s[2] - s[3]) / 2, s[0], s[1], (s[2] + s[3]) / 2])
