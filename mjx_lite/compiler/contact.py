"""Explicit contact pairs and body-pair exclusions -> pair_* and exclude_signature.

XML reference (MuJoCo 4.0 wheel, ``doc/XMLreference.rst``), sections ``contact/pair`` and
``contact/exclude``. A pair takes every parameter from itself or its default class, never
from its geoms. MuJoCo orders both lists by body-pair signature, (body1 << 16) + body2 with
body1 <= body2 (geoms of a pair swapped to match), keeping document order among equals.
"""

from __future__ import annotations

import numpy as np

from mjx_lite.compiler.context import Context

_SOLREF = (0.02, 1.0)
_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
_FRICTION = (1.0, 1.0, 0.005, 0.0001, 0.0001)


def build_contact(ctx: Context) -> dict:
    """npair, pair_*, nexclude, exclude_signature (names registered in MuJoCo's order)."""
    f = ctx.fields
    body_of = f["geom_bodyid"]
    pairs = []
    excludes = []
    for el in ctx.spec.section("contact"):
        if el.tag == "pair":
            g1 = ctx.lookup("geom", el.get("geom1"), el, "geom1")
            g2 = ctx.lookup("geom", el.get("geom2"), el, "geom2")
            b1, b2 = int(body_of[g1]), int(body_of[g2])
            if b1 > b2:
                g1, g2, b1, b2 = g2, g1, b2, b1
            pairs.append(((b1 << 16) + b2, g1, g2, el))
        else:
            b1 = ctx.lookup("body", el.get("body1"), el, "body1")
            b2 = ctx.lookup("body", el.get("body2"), el, "body2")
            b1, b2 = min(b1, b2), max(b1, b2)
            excludes.append(((b1 << 16) + b2, el))
    pairs.sort(key=lambda p: p[0])  # stable: document order among equal signatures
    excludes.sort(key=lambda e: e[0])

    n = len(pairs)
    out = {
        "pair_dim": np.zeros(n, np.int32), "pair_geom1": np.zeros(n, np.int32),
        "pair_geom2": np.zeros(n, np.int32), "pair_signature": np.zeros(n, np.int32),
        "pair_solref": np.zeros((n, 2)), "pair_solreffriction": np.zeros((n, 2)),
        "pair_solimp": np.zeros((n, 5)), "pair_margin": np.zeros(n), "pair_gap": np.zeros(n),
        "pair_friction": np.zeros((n, 5)), "pair_adhesion": np.zeros(n),
    }
    for i, (sig, g1, g2, el) in enumerate(pairs):
        ctx.register("pair", el)
        condim = el.get("condim", 3)
        if condim not in (1, 3, 4, 6):
            raise el.error(f"attribute 'condim' must be 1, 3, 4 or 6, got {condim}")
        out["pair_dim"][i] = condim
        out["pair_geom1"][i], out["pair_geom2"][i], out["pair_signature"][i] = g1, g2, sig
        out["pair_solref"][i] = el.vec("solref", _SOLREF)
        out["pair_solreffriction"][i] = el.vec("solreffriction", (0.0, 0.0))
        out["pair_solimp"][i] = el.vec("solimp", _SOLIMP)
        out["pair_margin"][i] = el.get("margin", 0.0)
        out["pair_gap"][i] = el.get("gap", 0.0)
        out["pair_friction"][i] = el.vec("friction", _FRICTION)
        out["pair_adhesion"][i] = el.get("adhesion", 0.0)
        if out["pair_adhesion"][i] != 0:
            raise el.error("unsupported: pair adhesion (contact adhesion force) is not "
                           "implemented by mjx_lite")
    for _, el in excludes:
        ctx.register("exclude", el)
    out["npair"] = n
    out["nexclude"] = len(excludes)
    out["exclude_signature"] = np.array([e[0] for e in excludes], np.int32)
    ctx.fields.update(out)
    return out
