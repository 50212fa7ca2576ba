"""Field-by-field comparison of a compiled mjx_lite Model with MuJoCo's mjModel.

Rules (issue 3, acceptance): relative 1e-10 for arrays from primitives, frames and parameters;
1e-6 for mesh- and hfield-derived arrays; quaternions up to sign; body principal axes compared as
axes (each up to sign); mesh vertices compared as a vertex set, not by order.
"""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

from mjx_lite.compiler.frames import quat_to_mat
from mjx_lite.interop import NAME_KINDS, _names
from mjx_lite.types import Model

FIELDS_FILE = pathlib.Path(__file__).with_name("model_fields.txt")
RTOL = 1e-10
RTOL_MESH = 1e-6
# Arrays derived from meshes or height fields (float32 data in MuJoCo).
MESH_DERIVED = {"mesh_vert", "mesh_pos", "mesh_quat", "mesh_scale", "hfield_data", "hfield_size"}
QUATERNIONS = {"body_quat", "geom_quat", "site_quat", "cam_quat", "mesh_quat"}
# Derived from mesh geometry when the geom or body uses a mesh: compared at RTOL_MESH there.
MESH_DEPENDENT = {"geom_size", "geom_pos", "geom_quat", "geom_aabb", "geom_rbound", "body_mass",
                  "body_inertia", "body_ipos", "body_iquat", "body_subtreemass", "stat.meanmass",
                  "stat.meaninertia",
                  "dof_invweight0", "body_invweight0", "dof_M0", "actuator_acc0",
                  "tendon_invweight0", "geom_fluid", "cam_poscom0", "light_poscom0"}
_NOT_IN_MJMODEL = {"names", "body_depth", "dof_depth", "signature", "numeric_data", "text_data",
                   "wrap_sideid", "geom_reach", "geom_extra",
                   "hfield_cell", "geom_fluidshape"}


def listed_fields() -> list[str]:
    return [line.split("#")[0].strip() for line in FIELDS_FILE.read_text().splitlines()
            if line.split("#")[0].strip()]


def carried_fields() -> list[str]:
    """Every Model field that mirrors an mjModel field (opt.* and stat.* included)."""
    out = []
    for f in dataclasses.fields(Model):
        if f.name in _NOT_IN_MJMODEL:
            continue
        if f.name in ("opt", "stat"):
            from mjx_lite.types import Option, Statistic

            cls = Option if f.name == "opt" else Statistic
            out.extend(f"{f.name}.{g.name}" for g in dataclasses.fields(cls))
        else:
            out.append(f.name)
    return out


def _get(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _axes_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    """Largest deviation between corresponding frame axes, each axis up to sign."""
    err = 0.0
    for a, b in zip(ours.reshape(-1, 4), theirs.reshape(-1, 4)):
        dots = np.abs((quat_to_mat(a) * quat_to_mat(b)).sum(0))
        err = max(err, float(np.abs(dots - 1).max()))
    return err


def _quat_error(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    ours, theirs = ours.reshape(-1, 4), theirs.reshape(-1, 4)
    plus = np.abs(ours - theirs).max(axis=1, initial=0)
    minus = np.abs(ours + theirs).max(axis=1, initial=0)
    return np.minimum(plus, minus)


def _vertex_set_error(m, mjm) -> float:
    """Per mesh: both vertex sets equal after sorting (centred already by both compilers)."""
    err = 0.0
    for i in range(mjm.nmesh):
        a, n = mjm.mesh_vertadr[i], mjm.mesh_vertnum[i]
        theirs = np.asarray(mjm.mesh_vert[a:a + n], dtype=float)
        a2, n2 = m.mesh_vertadr[i], m.mesh_vertnum[i]
        ours = np.asarray(m.mesh_vert[a2:a2 + n2], dtype=float)
        if ours.shape != theirs.shape:
            return np.inf
        ours = ours[np.lexsort(ours.T[::-1])]
        theirs = theirs[np.lexsort(theirs.T[::-1])]
        scale = max(np.abs(theirs).max(initial=0), 1e-12)
        err = max(err, float(np.abs(ours - theirs).max(initial=0) / scale))
    return err


def _graph_edges(graph, adr, vert) -> tuple[int, int, set]:
    """(numvert, numface, hull edges as pairs of rounded vertex coordinates) of one mesh."""
    if adr < 0:
        return 0, 0, set()
    g = np.asarray(graph[adr:])
    nv, nf = int(g[0]), int(g[1])
    gid = g[2 + nv:2 + 2 * nv]
    loc = g[2 + 2 * nv:2 + 3 * nv + 3 * nf]
    key = lambda i: tuple(np.round(np.asarray(vert[gid[i]], float), 5))  # noqa: E731
    edges, v = set(), 0
    for x in loc:
        if x < 0:
            v += 1
        else:
            edges.add(frozenset((key(v), key(int(x)))))
    return nv, nf, edges


def _graph_error(m, mjm) -> float:
    """Per mesh: same hull vertex and face counts and the same hull edges (by coordinates);
    vertex numbering and neighbour order are free."""
    for i in range(mjm.nmesh):
        va, vn = mjm.mesh_vertadr[i], mjm.mesh_vertnum[i]
        theirs = _graph_edges(mjm.mesh_graph, mjm.mesh_graphadr[i], mjm.mesh_vert[va:va + vn])
        va, vn = m.mesh_vertadr[i], m.mesh_vertnum[i]
        ours = _graph_edges(m.mesh_graph, m.mesh_graphadr[i],
                            np.asarray(m.mesh_vert)[va:va + vn])
        if ours != theirs:
            return np.inf
    return 0.0


POLYGON_FIELDS = {"mesh_polynum", "mesh_polyadr", "mesh_polynormal", "mesh_polyvertadr",
                  "mesh_polyvertnum", "mesh_polyvert"}


# MuJoCo groups hull triangles whose normals agree within 1.6e-3 rad into one polygon, with an
# order-dependent search (compiler.mesh.mesh_polygons); near-coplanar triangles can group
# differently there and here. A polygon that is not in the other side's list must overlap one
# there (two corners shared) whose normal agrees within this cosine (6.3e-3 rad).
POLY_REGROUP_COS = 0.99998


def _polygons(src, i) -> list[tuple[np.ndarray, frozenset]]:
    """(normal, corner coordinates rounded) of each polygon of mesh i."""
    va, vn = src.mesh_vertadr[i], src.mesh_vertnum[i]
    vert = np.asarray(src.mesh_vert)[va:va + vn]
    normal, vadr = np.asarray(src.mesh_polynormal), np.asarray(src.mesh_polyvertadr)
    vnum, pvert = np.asarray(src.mesh_polyvertnum), np.asarray(src.mesh_polyvert)
    adr = int(src.mesh_polyadr[i])
    return [(normal[f], frozenset(tuple(np.round(np.asarray(vert[k], float), 5))
                                  for k in pvert[vadr[f]:vadr[f] + vnum[f]]))
            for f in range(adr, adr + int(src.mesh_polynum[i]))]


def _polygon_error(m, mjm) -> float:
    """Per mesh: every polygon equal on both sides (same corners, normals within
    ``POLY_REGROUP_COS``: a regrouped polygon takes another first triangle's normal), except
    near-coplanar regroupings (``POLY_REGROUP_COS``). 0 or inf."""
    err = 0.0
    for i in range(mjm.nmesh):
        theirs, ours = _polygons(mjm, i), _polygons(m, i)
        if not theirs and not ours:
            continue
        if not theirs or not ours:
            return np.inf
        by_corners = {c: n for n, c in ours}
        if any(c in by_corners and n @ by_corners[c] <= POLY_REGROUP_COS for n, c in theirs):
            return np.inf
        for a, b in ((theirs, ours), (ours, theirs)):
            exact = {c for _, c in b}
            for n, c in a:
                if c in exact:
                    continue
                if not any(n @ n2 > POLY_REGROUP_COS and len(c & c2) >= 2 for n2, c2 in b):
                    return np.inf
    return err


def field_error(m, mjm, name: str) -> tuple[float, float, str]:
    """(relative error, tolerance, where) of one listed field."""
    uses_mesh = mjm.nmesh > 0 or mjm.nhfield > 0
    rtol = RTOL_MESH if name in MESH_DERIVED or (uses_mesh and name in MESH_DEPENDENT) else RTOL
    if name == "mesh_vert":
        return _vertex_set_error(m, mjm), rtol, ""
    if name == "mesh_graph":
        return _graph_error(m, mjm), rtol, "hull graph"
    if name in POLYGON_FIELDS:
        return _polygon_error(m, mjm), rtol, "polygon planes"
    if name == "mesh_face":
        ok = np.asarray(m.mesh_face).shape == np.asarray(mjm.mesh_face).shape
        return (0.0 if ok else np.inf), rtol, "shape"
    ours = _get(m, name)
    theirs = _get(mjm, name)
    if not isinstance(theirs, np.ndarray):
        theirs = np.asarray(theirs)
        ours = np.asarray(int(ours) if hasattr(ours, "__int__") and theirs.dtype.kind in "iu"
                          else ours)
    ours = np.asarray(ours, dtype=float)
    theirs = np.asarray(theirs, dtype=float)
    if ours.size != theirs.size:
        return np.inf, rtol, f"shape {ours.shape} vs {theirs.shape}"
    ours = ours.reshape(theirs.shape)
    if ours.size == 0:
        return 0.0, rtol, ""
    scale = float(np.abs(theirs).max())
    if name == "body_iquat":
        return _axes_error(ours, theirs), rtol, "axes"
    if name in QUATERNIONS:
        diff = _quat_error(ours, theirs)
        worst = int(np.argmax(diff))
        return float(diff.max()), rtol, f"row {worst}"
    diff = np.abs(ours - theirs)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
    err = float(diff.max() / scale) if scale > 0 else float(diff.max())
    return err, rtol, f"index {worst}: ours {ours[worst]!r} vs mujoco {theirs[worst]!r}"


def compare_model(m, mjm, fields=None) -> dict[str, tuple[float, float, str]]:
    """Errors of every listed field; also checks names per kind."""
    out = {}
    for name in fields or listed_fields():
        out[name] = field_error(m, mjm, name)
    names = dict(m.names)
    for kind in NAME_KINDS:
        theirs = _names(mjm, kind)
        ok = tuple(names.get(kind, ())) == theirs
        out[f"names.{kind}"] = (0.0 if ok else np.inf, 0.0, f"{names.get(kind)} vs {theirs}")
    return out


def failures(errors: dict) -> list[str]:
    return [f"{k}: {e:.3g} > {tol:.0e} ({where})" for k, (e, tol, where) in errors.items()
            if not e <= tol]
