"""The general convex collider (GJK/EPA) against MuJoCo 4.0's native convex pipeline.

Contacts are compared as sets (``test_collision.compare``). The tolerances are the issue's
for convex-solver pairs: dist max(1e-5, 10 ccd_tolerance size), normal and pos 1e-4.

MuJoCo's EPA stops once its polytope bound is within ccd_tolerance of its support bound; on
curved surfaces and deep penetrations that leaves its normal up to ~1e-1 and its depth up to
~1e-4 from the true optimum (checked here against an independent optimizer of the support
functions). Where MuJoCo is further than the tolerance from ours, the test therefore checks
that ours is the true optimum and MuJoCo's is not: ``dist`` equals the independent optimum to
1e-7 and MuJoCo's normal is a worse separating direction than ours. Such states are counted
and reported (tests/acceptance/collision_convex.txt), never silently passed.
"""

from __future__ import annotations

import pathlib

import mujoco
import numpy as np
import pytest
import test_collision as tc
from scipy.optimize import minimize

from conftest import MJX_TEST_DATA, MODELS_DIR

TOL = {"dist": 1e-5, "pos": 1e-4, "frame": 1e-4, "params": 1e-8}
# our depth must equal the independent optimum this closely where ours and MuJoCo's differ
# (the converged solver reaches ~2e-7 on curved pairs, MuJoCo's own search ccd_tolerance)
ORACLE_TOL = 1e-6
ACCEPTANCE_FILE = pathlib.Path(__file__).parent / "acceptance" / "collision_convex.txt"

ASSETS = f"""<asset>
  <mesh name="pebble" file="{MODELS_DIR / 'assets' / 'pebble.stl'}" scale="2 2 2"/>
  <mesh name="rock" file="{MODELS_DIR / 'assets' / 'rock.obj'}" scale="2 2 2"/>
  <mesh name="dodecahedron" file="{MJX_TEST_DATA / 'meshes' / 'dodecahedron.stl'}"
        scale="0.1 0.1 0.1"/>
</asset>"""

GEOM = {
    "plane": '<geom type="plane" size="5 5 1"/>',
    "sphere": '<geom type="sphere" size="0.15"/>',
    "capsule": '<geom type="capsule" size="0.1 0.2"/>',
    "ellipsoid": '<geom type="ellipsoid" size="0.2 0.3 0.1"/>',
    "ellipsoid2": '<geom type="ellipsoid" size="0.15 0.1 0.25"/>',
    "cylinder": '<geom type="cylinder" size="0.15 0.2"/>',
    "box": '<geom type="box" size="0.2 0.15 0.1"/>',
    # a subdivided icosphere (642 hull vertices, models/assets/make_meshes.py)
    "pebble": '<geom type="mesh" mesh="pebble"/>',
    "rock": '<geom type="mesh" mesh="rock"/>',
    "dodecahedron": '<geom type="mesh" mesh="dodecahedron"/>',
}

NOMULTI = 'multiccd="disable"'
# pair name -> (geom1, geom2, extra option flags); MuJoCo returns one contact for these
PAIRS = {
    "capsule_ellipsoid": ("capsule", "ellipsoid", ""),
    "ellipsoid_ellipsoid": ("ellipsoid", "ellipsoid2", ""),
    "ellipsoid_cylinder": ("ellipsoid", "cylinder", ""),
    "ellipsoid_box": ("ellipsoid", "box", ""),
    "sphere_pebble": ("sphere", "pebble", ""),
    "sphere_dodecahedron": ("sphere", "dodecahedron", ""),
    "ellipsoid_pebble": ("ellipsoid", "pebble", ""),
    "ellipsoid_rock": ("ellipsoid", "rock", ""),
    # the other convex-solver pairs give one contact only with multiccd disabled
    "capsule_cylinder_single": ("capsule", "cylinder", NOMULTI),
    "cylinder_cylinder_single": ("cylinder", "cylinder", NOMULTI),
    "cylinder_box_single": ("cylinder", "box", NOMULTI),
    "capsule_rock_single": ("capsule", "rock", NOMULTI),
    "box_pebble_single": ("box", "pebble", NOMULTI),
    "rock_pebble_single": ("rock", "pebble", NOMULTI),
    "dodecahedron_rock_single": ("dodecahedron", "rock", NOMULTI),
}


def pair_model(g1: str, g2: str, flags: str = "", margin: float = 0.02) -> mujoco.MjModel:
    first = GEOM[g1] if g1 == "plane" else f'<body name="b1"><freejoint/>{GEOM[g1]}</body>'
    xml = f"""<mujoco><option><flag gravity="disable" {flags}/></option>{ASSETS}
      <default><geom margin="{margin}"/></default>
      <worldbody>{first}
      <body name="b2" pos="0 0 1"><freejoint/>{GEOM[g2]}</body></worldbody></mujoco>"""
    return mujoco.MjModel.from_xml_string(xml)


def _support(mjm, d, g: int, n: np.ndarray) -> float:
    """Support value max_x n.x of geom g (world direction n), straight from its definition."""
    mat = d.geom_xmat[g].reshape(3, 3)
    p, s, t = d.geom_xpos[g], mjm.geom_size[g], mjm.geom_type[g]
    dl = mat.T @ n
    G = mujoco.mjtGeom
    if t == G.mjGEOM_SPHERE:
        return p @ n + s[0] * np.linalg.norm(dl)
    if t == G.mjGEOM_CAPSULE:
        return p @ n + s[0] * np.linalg.norm(dl) + s[1] * abs(dl[2])
    if t == G.mjGEOM_ELLIPSOID:
        return p @ n + np.linalg.norm(s * dl)
    if t == G.mjGEOM_CYLINDER:
        return p @ n + s[0] * np.linalg.norm(dl[:2]) + s[1] * abs(dl[2])
    if t == G.mjGEOM_BOX:
        return p @ n + np.abs(dl) @ s
    i = mjm.geom_dataid[g]
    v = mjm.mesh_vert[mjm.mesh_vertadr[i]:mjm.mesh_vertadr[i] + mjm.mesh_vertnum[i]]
    return p @ n + np.max(v.astype(float) @ dl)


def oracle(mjm, qpos, g1: int, g2: int, starts) -> tuple[float, np.ndarray, callable]:
    """Signed distance = max over unit n of -(h1(n) + h2(-n)), n from geom1 to geom2, by
    Nelder-Mead from several starts. Returns (dist, normal, gap function of n)."""
    d = mujoco.MjData(mjm)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(mjm, d)

    def gap(n):
        n = n / np.linalg.norm(n)
        return -(_support(mjm, d, g1, n) + _support(mjm, d, g2, -n))

    best = (-np.inf, None)
    for n0 in starts:
        r = minimize(lambda x: -gap(x), n0, method="Nelder-Mead",
                     options=dict(xatol=1e-12, fatol=1e-15, maxiter=4000))
        if -r.fun > best[0]:
            best = (-r.fun, r.x / np.linalg.norm(r.x))
    return best[0], best[1], gap


def sweep(name: str, n: int, seed: int = 1) -> dict:
    """Worst errors vs MuJoCo over n near-contact states, and how many states needed the
    oracle (MuJoCo's EPA off the optimum by more than the tolerance)."""
    g1, g2, flags = PAIRS[name]
    mjm = pair_model(g1, g2, flags)
    qposes = tc.random_states(mjm, np.random.default_rng(seed), n)
    ours, theirs = tc.ours_and_theirs(mjm, qposes)
    worst = {"dist": 0.0, "pos": 0.0, "frame": 0.0, "params": 0.0, "ncon": 0, "oracle": 0,
             "oracle_dist": 0.0, "mj_short": 0.0, "face": 0}
    for k, (o, t) in enumerate(zip(ours, theirs)):
        w = tc.compare(o, t)  # asserts equal contact sets (counts per pair)
        worst["ncon"] += len(t)
        worst["params"] = max(worst["params"], w["params"])
        if all(w[f] <= TOL[f] for f in ("dist", "pos", "frame")):
            for f in ("dist", "pos", "frame"):
                worst[f] = max(worst[f], w[f])
            continue
        # MuJoCo and ours differ: decide with the independent optimum
        c_o, c_t = o[0], t[0]
        dist, _, gap = oracle(mjm, qposes[k], 0, 1, [c_o["frame"][:3], c_t["frame"][:3]])
        err = abs(c_o["dist"] - dist)
        assert err < ORACLE_TOL, f"{name} state {k}: ours {c_o['dist']} vs optimum {dist}"
        worst["oracle_dist"] = max(worst["oracle_dist"], err)
        if w["dist"] <= TOL["dist"] and w["frame"] <= TOL["frame"]:
            # same depth and normal, another point of a flat contact patch: both points lie
            # on the same plane across the normal (the issue's "same contact face")
            off = abs(np.dot(c_o["frame"][:3], c_o["pos"] - c_t["pos"]))
            assert off < TOL["pos"], f"{name} state {k}: pos off the contact plane by {off}"
            worst["face"] += 1
            continue
        # MuJoCo's normal separates no better than ours (its EPA stopped short of the optimum,
        # or, with nativeccd, on another path than ours)
        assert gap(c_t["frame"][:3]) <= gap(c_o["frame"][:3]) + 1e-12, f"{name} state {k}"
        worst["oracle"] += 1
        worst["mj_short"] = max(worst["mj_short"], abs(c_t["dist"] - dist))
    return worst


CI_PAIRS = ["ellipsoid_box", "sphere_pebble"]


@pytest.mark.parametrize("name", CI_PAIRS)
def test_convex_pair_matches_mujoco(name):
    """Both pairs take MuJoCo's own search where it touches or penetrates
    (``collision.nativeccd``): every contact within the tolerances, none left to the
    oracle (before it: ellipsoid-box 19 of 37 contacts in the 50-state sweep)."""
    worst = sweep(name, n=5)
    assert worst["ncon"] > 0
    assert worst["params"] < TOL["params"]
    assert worst["oracle"] == 0 and worst["face"] == 0, worst


def test_separated_smooth_pair_takes_mujocos_gjk_distance():
    """An ellipsoid or cylinder geom 1 apart from geom 2 by more than ccd_tolerance (within
    the margin) gets the contact of MuJoCo 4.0's GJK distance query, stopped at
    ccd_tolerance (``nativeccd.distance_search``), not the converged distance: same normal to
    rounding. The converged one put ellipsoid-cylinder's separated normals up to 2.9e-5 off
    (collision_convex.txt before session 37)."""
    mjm = pair_model("ellipsoid", "cylinder")
    qposes = tc.random_states(mjm, np.random.default_rng(1), 50)
    ours, theirs = tc.ours_and_theirs(mjm, qposes)
    apart = 0
    for o, t in zip(ours, theirs):
        if len(t) != 1 or t[0]["dist"] <= 1e-6:
            continue
        apart += 1
        assert len(o) == 1
        assert abs(o[0]["dist"] - t[0]["dist"]) < 1e-10
        assert np.abs(o[0]["frame"][:3] - t[0]["frame"][:3]).max() < 1e-8
        assert np.abs(o[0]["pos"] - t[0]["pos"]).max() < 1e-8
    assert apart >= 4, apart


@pytest.mark.acceptance
def test_convex_acceptance():
    lines = ["convex-solver pairs: 50 random near-contact states each vs MuJoCo 4.0 mj_forward",
             "dist/pos/frame: worst |ours - MuJoCo| over states where MuJoCo is within tolerance;",
             "face: states where only pos differs, both points on the same contact plane",
             "(a flat patch: MuJoCo's EPA picks another point of it);",
             "oracle: states beyond the tolerance where MuJoCo's normal separates no better than",
             "ours (ours within oracle_err of the independent optimum depth, MuJoCo off it by",
             "mj_short). Pairs with a smooth geom take MuJoCo's own GJK/EPA search where they",
             "touch or penetrate (collision.nativeccd); before it, MuJoCo's EPA stopped short",
             "of ours at 19 of 37 ellipsoid-box and 26 of 32 ellipsoid-ellipsoid contacts.",
             "Box-mesh and mesh-mesh take it too (nativeccd.POLY_PAIRS); before, their",
             "converged contacts were up to 1.8e-5 (frame) and 7.8e-5 (pos) off MuJoCo's.", ""]
    for name in PAIRS:
        w = sweep(name, n=50)
        lines.append(
            f"{name:22s} contacts {w['ncon']:3d}  dist {w['dist']:.1e}  pos {w['pos']:.1e}  "
            f"frame {w['frame']:.1e}  face {w['face']:2d}  oracle {w['oracle']:2d} (oracle_err "
            f"{w['oracle_dist']:.1e}, mj_short {w['mj_short']:.1e})")
    ACCEPTANCE_FILE.parent.mkdir(exist_ok=True)
    ACCEPTANCE_FILE.write_text("\n".join(lines) + "\n")


def check_grad_finite(name: str):
    """jax.grad of the contact dist, pos and frame w.r.t. qpos is finite at coincident
    centers, exact touching and aligned poses."""
    g1, g2, flags = PAIRS[name]
    mjm = pair_model(g1, g2, flags, margin=0.0)
    # exact touching along z: the sum of the two geoms' z half-extents
    top = mjm.geom_aabb[1][5] + mjm.geom_aabb[1][2]
    bottom = mjm.geom_aabb[0][5] - mjm.geom_aabb[0][2]
    q = mjm.qpos0.copy()
    q[:7] = [0, 0, 0, 1, 0, 0, 0]
    q[7:10] = [0, 0, top + bottom]
    tc.check_grad_finite(name, mjm, [q])


@pytest.mark.parametrize("name", ["ellipsoid_box"])
def test_grad_finite(name):
    check_grad_finite(name)


@pytest.mark.acceptance
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_grad_finite_all_pairs(name):
    check_grad_finite(name)


MODELS = ["box_stack.xml", "humanoid_like.xml"]


def check_model(path, nstate: int) -> dict:
    """Contacts at MuJoCo rollout states (>= 4 contacts where reached) equal MuJoCo's."""
    mjm = mujoco.MjModel.from_xml_path(str(path))
    states = tc.rollout_states(mjm, nstate)
    assert states, f"{path.name}: no contact in the rollout"
    ours, theirs = tc.ours_and_theirs(mjm, states)
    worst = {"dist": 0.0, "pos": 0.0, "frame": 0.0, "params": 0.0, "ncon": 0}
    tol = tc._model_tolerance(mjm)
    for o, t in zip(ours, theirs):
        w = tc.compare(o, t)
        worst = {k: max(worst[k], w.get(k, 0)) for k in worst}
        worst["ncon"] += len(t)
    for f in ("dist", "pos", "frame", "params"):
        assert worst[f] < tol[f], (path.name, f, worst)
    return worst


@pytest.mark.acceptance
def test_models_acceptance():
    lines = []
    for name in MODELS:
        w = check_model(MODELS_DIR / name, 10)
        lines.append(f"{name:22s} 10 rollout states, contacts {w['ncon']:4d}  " + "  ".join(
            f"{k} {w[k]:.1e}" for k in ("dist", "pos", "frame", "params")))
    out = ACCEPTANCE_FILE.with_name("collision_models.txt")
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


# MuJoCo 4.0's box/mesh multi-contact, as measured (tests/multiccd_reference.py): given
# MuJoCo's EPA normal, the numpy model reproduces every state of these pairs (on box-pebble
# 3 of 50 states differ: MuJoCo's EPA names another face of the pebble than the support set)
MULTICCD_MODEL_PAIRS = [("box", "rock"), ("box", "dodecahedron")]
MULTICCD_MODEL_TOL = 1e-6
@pytest.mark.parametrize("g1,g2", MULTICCD_MODEL_PAIRS)
def test_multiccd_reference_matches_mujoco(g1, g2):
    import multiccd_reference as ref

    mjm = pair_model(g1, g2, margin=0.0)
    d = mujoco.MjData(mjm)
    multi = 0
    for k, q in enumerate(tc.random_states(mjm, np.random.default_rng(1), 50)):
        d.qpos[:] = q
        mujoco.mj_forward(mjm, d)
        if not d.ncon:
            continue
        got = ref.multicontact(mjm, d, ref.epa_single(mjm, q)[1])
        if got is None:
            assert d.ncon == 1, (g1, g2, k, d.ncon)
            continue
        multi += d.ncon > 1
        assert len(got) == d.ncon, (g1, g2, k, len(got), d.ncon)
        for c in d.contact[:d.ncon]:
            err = min(max(abs(s - c.dist), np.max(np.abs(p - c.pos))) for s, p in got)
            assert err < MULTICCD_MODEL_TOL, (g1, g2, k, err)
    assert multi > 5


# The JAX multi-contact collider (mjx_lite.collision.multiccd) against MuJoCo 4.0 (margin 0).
MULTI_PAIRS = {"box_pebble": ("box", "pebble"), "box_dodecahedron": ("box", "dodecahedron"),
               "box_rock": ("box", "rock"), "rock_pebble": ("rock", "pebble"),
               "dodecahedron_rock": ("dodecahedron", "rock")}
MULTI_FILE = ACCEPTANCE_FILE.with_name("collision_multiccd.txt")


def _rule_on_mujoco_normal(mjm, qposes, margin: float = 0.0):
    """Our multi-contact rule (multiccd.manifold) fed with MuJoCo's own GJK/EPA result (its
    single contact with multiccd disabled) and the features of our port of its search
    (``nativeccd``; the ids agree with libmujoco's but where its hill-climbing support
    breaks a tie of mesh vertices the other way), per state: [(dist, pos)] of the valid
    contacts, MuJoCo's EPA normal (None without contact) and ours. One jit for all
    states."""
    import jax
    import jax.numpy as jp
    import multiccd_reference as ref

    from mjx_lite import interop
    from mjx_lite.collision import driver, multiccd, nativeccd

    m = interop.model_from_mujoco(mjm)
    g = np.array([0, 1])
    types = [int(t) for t in mjm.geom_type[:2]]
    verts = [driver._mesh_verts(m, g[k:k + 1])[0] if types[k] == mujoco.mjtGeom.mjGEOM_MESH
             else None for k in range(2)]
    tables = [None if v is None else tuple(jp.asarray(t[0]) for t in multiccd.mesh_tables(
        m, np.asarray(mjm.geom_dataid)[k:k + 1], v.shape[0])) for k, v in enumerate(verts)]
    d = mujoco.MjData(mjm)
    rows, mj_normal = [], []
    for q in qposes:
        d.qpos[:] = q
        mujoco.mj_kinematics(mjm, d)
        epa = ref.epa_single(mjm, q)
        mj_normal.append(None if epa is None else epa[1])
        dist, n, pos = epa if epa else (1.0, np.array([0, 0, 1.0]), np.zeros(3))
        rows.append((d.geom_xpos[:2].copy(), d.geom_xmat[:2].reshape(2, 3, 3).copy(),
                     dist, n, pos))
    xpos, xmat, dist, n, pos = (jp.asarray(np.stack([r[i] for r in rows])) for i in range(5))
    size = jp.asarray(mjm.geom_size[:2])

    def one(xpos, xmat, dist, n, pos):
        epa, gen = nativeccd.signed_distance(
            types[0], types[1], (xpos[0], xmat[0], size[0], verts[0], xpos[1], xmat[1],
                                 size[1], verts[1]), jp.asarray(margin))
        return multiccd.manifold(types[0], types[1], dist, n, pos, xpos[0], xmat[0], size[0],
                                 verts[0], tables[0], xpos[1], xmat[1], size[1], verts[1],
                                 tables[1], margin, (gen[4], gen[3], gen[2])), epa[1], \
            (gen[4], gen[3], gen[2])

    out, epa_n, (ids1, ids2, taken) = jax.jit(jax.vmap(one))(xpos, xmat, dist, n, pos)
    od, op, _, ov = (np.asarray(x) for x in out)
    feats = [(sorted({int(i) for i in ids1[k]}), sorted({int(i) for i in ids2[k]}))
             if taken[k] else None for k in range(len(qposes))]
    return [[(float(od[k, j]), op[k, j]) for j in range(od.shape[1]) if ov[k, j]]
            for k in range(len(qposes))], mj_normal, np.asarray(epa_n), feats


def multi_sweep(name: str, n: int, seed: int = 1, margin: float = 0.0) -> dict:
    """Our multi-contact vs MuJoCo's over n near-contact states (``margin`` per geom).

    ``rule``: worst error of our rule fed with MuJoCo's own GJK/EPA result and our search's
    features (the port of the measured rule, isolated from GJK/EPA); ``rule_off`` counts
    states where it is off by more than 1e-6 or gives another count (``rule_off_count``;
    there the numpy model tests/multiccd_reference.py, given the same features, must give
    our count: the measured rule's gaps, or a feature where MuJoCo's hill-climbing mesh
    support breaks a tie the other way).
    Full pipeline: where MuJoCo's EPA normal is ours (``nativeccd``'s search) within the
    normal tolerance and the rule is exact, same count and dist/pos/frame within tolerance
    (worst reported); elsewhere
    (``epa``) MuJoCo's EPA stopped short of the optimum (on the curved pebble by up to 1e-1
    rad) and the face choice and every point move with the normal: there our normal must
    separate at least as well as MuJoCo's (``oracle``'s gap); ``epa_count``: those of them
    with another contact count.
    """
    import multiccd_reference as ref

    g1, g2 = MULTI_PAIRS[name]
    mjm = pair_model(g1, g2, margin=margin)
    qposes = tc.random_states(mjm, np.random.default_rng(seed), n)
    ours, theirs = tc.ours_and_theirs(mjm, qposes)
    given, mj_normal, epa_normal, feats = _rule_on_mujoco_normal(mjm, qposes, 2 * margin)
    size = float(np.max(mjm.geom_rbound[:2]))
    tol = {"dist": max(1e-5, 10 * mjm.opt.ccd_tolerance * size), "pos": 1e-4, "frame": 1e-4}
    worst = {"dist": 0.0, "pos": 0.0, "frame": 0.0, "rule": 0.0, "ncon": 0, "multi": 0,
             "epa": 0, "epa_count": 0, "rule_off": 0, "rule_off_err": 0.0,
             "rule_off_count": 0}
    for k, (o, t, gv) in enumerate(zip(ours, theirs, given)):
        worst["ncon"] += len(t)
        worst["multi"] += len(t) > 1
        if not t:
            assert not o, (name, k, len(o))
            continue
        if len(gv) != len(t):
            # a gap of the measured rule itself: the numpy reference gives our count too
            d = mujoco.MjData(mjm)
            d.qpos[:] = qposes[k]
            mujoco.mj_forward(mjm, d)
            got = ref.multicontact(mjm, d, mj_normal[k], 2 * margin, feats[k])
            assert (1 if got is None else len(got)) == len(gv), (name, k, len(gv), len(t))
            worst["rule_off"] += 1
            worst["rule_off_count"] += 1
            continue
        rule = max((min(max(abs(s - c["dist"]), np.max(np.abs(p - c["pos"]))) for s, p in gv)
                    for c in t), default=0.0)
        if rule > MULTICCD_MODEL_TOL:
            worst["rule_off"] += 1
            worst["rule_off_err"] = max(worst["rule_off_err"], rule)
            continue
        worst["rule"] = max(worst["rule"], rule)
        normal = np.abs(epa_normal[k] - mj_normal[k]).max()
        if len(o) == len(t) and normal <= tol["frame"]:
            w = tc.compare(o, t)
            assert w["dist"] <= tol["dist"] and w["pos"] <= tol["pos"], (name, k, w)
            for f in ("dist", "pos", "frame"):
                worst[f] = max(worst[f], w[f])
            continue
        assert o, (name, k, len(o), len(t))
        _, _, gap = oracle(mjm, qposes[k], 0, 1, [])
        assert gap(mj_normal[k]) <= gap(epa_normal[k]) + 1e-9, (name, k, normal)
        worst["epa"] += 1
        worst["epa_count"] += len(o) != len(t)
    return worst


def margin_sweep(name: str, n: int, margin: float, seed: int = 1) -> dict:
    """Our multi-contact vs MuJoCo's with a nonzero margin, the whole pipeline only: with a
    margin MuJoCo's multi-contact runs on another GJK/EPA result than its single contact with
    multiccd disabled, so the rule cannot be fed MuJoCo's own."""
    g1, g2 = MULTI_PAIRS[name]
    mjm = pair_model(g1, g2, margin=margin)
    qposes = tc.random_states(mjm, np.random.default_rng(seed), n)
    ours, theirs = tc.ours_and_theirs(mjm, qposes)
    return tc.sweep_sets(ours, theirs, lambda w: w["dist"] <= 1e-5 and w["pos"] <= 1e-4,
                         ("dist", "pos", "frame"))


@pytest.mark.acceptance
def test_multiccd_keeps_mujocos_quadrilateral():
    """Rock-pebble states of margin_sweep whose face-face patch has more than 4 corners and
    whose 4 kept points depend on the choice: MuJoCo 4.0 keeps its greedy search's
    quadrilateral over mesh faces walked backwards (the largest-area one put state 68 off,
    the greedy search over faces walked forwards states 9, 56 and 68)."""
    g1, g2 = MULTI_PAIRS["rock_pebble"]
    mjm = pair_model(g1, g2, margin=0.01)
    qposes = tc.random_states(mjm, np.random.default_rng(1), 69)
    ours, theirs = tc.ours_and_theirs(mjm, [qposes[k] for k in (9, 56, 68)])
    assert [len(t) for t in theirs] == [4, 4, 4]
    w = tc.sweep_sets(ours, theirs, lambda w: w["dist"] <= 1e-5 and w["pos"] <= 1e-4,
                      ("dist", "pos", "frame"))
    assert w["off"] == 0, w


@pytest.mark.acceptance  # CI time: test_multiccd_reference_matches_mujoco covers multiccd
def test_multiccd_box_dodecahedron():
    w = multi_sweep("box_dodecahedron", n=10)
    assert w["multi"] >= 2 and w["rule_off"] == 0, w


@pytest.mark.acceptance
def test_multiccd_acceptance():
    lines = ["box/mesh multi-contact (mjx_lite.collision.multiccd) vs MuJoCo 4.0 mj_forward,",
             "50 random near-contact states per pair, margin 0 (test_convex.multi_sweep).",
             "rule: worst |dist|,|pos| error of our rule fed with MuJoCo's normal and the",
             "features (vertex ids) of our port of its search (collision.nativeccd); rule_off:",
             "states where it is off by > 1e-6 (worst err; of them with another count, where",
             "multiccd_reference.py gives our count too): mesh-vertex ties its hill-climb",
             "breaks the other way;",
             "dist/pos/frame: full pipeline where the normals agree within 1e-4 (same count",
             "there); epa: states where MuJoCo's EPA normal is off ours, ours separating at",
             "least as well (epa_count: of them with another contact count: the aligned face",
             "flips with the normal)", ""]
    failed = []
    for name in MULTI_PAIRS:
        try:
            w = multi_sweep(name, n=50)
        except AssertionError as e:
            failed.append(f"{name}: {e}")
            lines.append(f"{name:18s} FAILED: {str(e)[:200]}")
            continue
        lines.append(
            f"{name:18s} contacts {w['ncon']:3d}  multi {w['multi']:2d}  rule {w['rule']:.1e}  "
            f"rule_off {w['rule_off']} ({w['rule_off_err']:.1e}, count {w['rule_off_count']})  "
            f"dist {w['dist']:.1e}  pos {w['pos']:.1e}  frame {w['frame']:.1e}  "
            f"epa {w['epa']:2d} (epa_count {w['epa_count']})")
    lines += ["", "with margin 0.01 per geom (pair margin 0.02), 100 states per pair, whole",
              "pipeline (test_convex.margin_sweep): off: states with another count or beyond",
              "the convex tolerance (dist 1e-5, pos 1e-4); worst errors over the others", ""]
    for name in MULTI_PAIRS:
        w = margin_sweep(name, n=100, margin=0.01)
        lines.append(f"{name:18s} contacts {w['ncon']:3d}  multi {w['multi']:2d}  "
                     f"dist {w['dist']:.1e}  pos {w['pos']:.1e}  frame {w['frame']:.1e}  "
                     f"off {w['off']} (count {w['off_count']})")
    MULTI_FILE.parent.mkdir(exist_ok=True)
    # the file's other sections (test_cylinder_multiccd.py's) stay
    old = MULTI_FILE.read_text() if MULTI_FILE.exists() else ""
    rest = old[old.index("\ncylinder/capsule"):] if "\ncylinder/capsule" in old else ""
    MULTI_FILE.write_text("\n".join(lines) + "\n" + rest)
    assert not failed, failed


@pytest.mark.acceptance  # CI time: test_cylinder_multiccd.py::test_grad_finite stays in CI
def test_multiccd_grad_finite():
    """Finite gradients through the multi-contact path: face-to-face touching box on the
    dodecahedron (aligned, clipped) besides the degenerate states of check_grad_finite."""
    mjm = pair_model("box", "dodecahedron", margin=0.0)
    extra = []
    for h in (0.0, -0.01):
        q = mjm.qpos0.copy()
        q[:7] = [0, 0, 0, 1, 0, 0, 0]
        top = mjm.geom_aabb[1][5] + mjm.geom_aabb[1][2]
        q[7:10] = [0.01, 0.02, mjm.geom_size[0][2] + top + h]
        extra.append(q)
    tc.check_grad_finite("box_dodecahedron", mjm, extra)


def test_multiccd_lone_cut_end_counts_twice():
    """Box 2 on pebble mesh 27 in models/collision_scene.xml's pile settled by 1000 MuJoCo
    steps: the box's edge lies in a mesh triangle, its clipped far end is above the margin and
    the near end was cut by the triangle's side plane, which MuJoCo's closed two-corner
    clipping counts twice: two equal contacts (one before the rule was followed)."""
    scene = MODELS_DIR / "collision_scene.xml"
    mjm = mujoco.MjModel.from_xml_path(str(scene))
    mjd = mujoco.MjData(mjm)
    for _ in range(1000):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_kinematics(mjm, mjd)
    bodies = [int(mjm.geom_bodyid[g]) for g in (2, 27)]
    pose = [(" ".join(f"{v:.17g}" for v in mjd.xpos[b]),
             " ".join(f"{v:.17g}" for v in mjd.xquat[b])) for b in bodies]
    xml = f"""<mujoco><compiler meshdir="{scene.parent / 'assets'}"/>
      <asset><mesh name="pebble" file="pebble.stl"/></asset><worldbody>
      <body pos="{pose[0][0]}" quat="{pose[0][1]}"><freejoint/>
        <geom type="box" size="0.049 0.049 0.049"/></body>
      <body pos="{pose[1][0]}" quat="{pose[1][1]}"><freejoint/>
        <geom type="mesh" mesh="pebble"/></body></worldbody></mujoco>"""
    pair = mujoco.MjModel.from_xml_string(xml)
    ours, theirs = tc.ours_and_theirs(pair, [pair.qpos0.copy()])
    assert len(theirs[0]) == 2 and np.allclose(theirs[0][0]["pos"], theirs[0][1]["pos"])
    worst = tc.compare(ours[0], theirs[0])
    assert max(worst["dist"], worst["pos"], worst["frame"]) < 1e-8, worst


def test_multiccd_feature_from_mujocos_search():
    """Box-dodecahedron at margin 0.01 per geom, states 19 and 21 of margin_sweep: MuJoCo's
    EPA (both shapes grown by half the pair margin) ends on a face with one box corner and
    three dodecahedron vertices, so 4.0's feature is a corner against a face and it keeps
    its single contact; the support set along the converged normal is a box edge, whose
    edge-face rule gave 2 contacts before the feature came from MuJoCo's own search
    (``nativeccd.POLY_PAIRS``)."""
    g1, g2 = MULTI_PAIRS["box_dodecahedron"]
    mjm = pair_model(g1, g2, margin=0.01)
    qposes = tc.random_states(mjm, np.random.default_rng(1), 22)
    ours, theirs = tc.ours_and_theirs(mjm, [qposes[k] for k in (19, 21)])
    assert [len(t) for t in theirs] == [1, 1]
    for o, t in zip(ours, theirs):
        w = tc.compare(o, t)
        assert max(w["dist"], w["pos"], w["frame"]) < 1e-8, w


def test_compacted_search_gradients():
    """The group-wide search (convex.signed_distances: GJK/EPA on the near pairs only, in a
    while_loop) carries no derivative; the rebuilt contacts do: on collision_scene.xml's
    settled pile (box-mesh group, 100 pairs, 4 near), jax.grad equals jax.jacfwd and a
    central difference along the gradient."""
    import jax
    import jax.numpy as jp

    import mjx_lite
    from mjx_lite import smooth
    from mjx_lite.collision import driver

    scene = MODELS_DIR / "collision_scene.xml"
    mjm = mujoco.MjModel.from_xml_path(str(scene))
    mjd = mujoco.MjData(mjm)
    for _ in range(1000):
        mujoco.mj_step(mjm, mjd)
    m = mjx_lite.load_model(scene)
    d0 = mjx_lite.make_data(m)
    grp = next(g for g in driver._groups(m) if tuple(g.types) == (6, 7))  # box, mesh
    assert len(grp.geom1) > 2 * 16  # more pairs than one chunk: the compacted path

    def loss(q):
        part, _ = driver.group_contacts(m, smooth.kinematics(m, d0.replace(qpos=q)), grp)
        v = part["valid"]
        return jp.sum(jp.where(v, part["dist"], 0.0)) + jp.sum(jp.where(v[:, None],
                                                                         part["pos"], 0.0))

    q = jp.asarray(mjd.qpos)
    # the differences' values come from the gradient's own program (one compile, not two)
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    grad = np.asarray(value_and_grad(q)[1])
    fwd = np.asarray(jax.jit(jax.jacfwd(loss))(q))
    assert np.all(np.isfinite(grad)) and np.abs(grad).max() > 0.1
    np.testing.assert_allclose(grad, fwd, atol=1e-12)
    u = grad / np.linalg.norm(grad)
    f = lambda q: float(value_and_grad(q)[0])  # noqa: E731
    eps = 1e-6
    central = (f(q + eps * u) - f(q - eps * u)) / (2 * eps)
    assert abs(central - np.linalg.norm(grad)) <= 1e-5 * np.linalg.norm(grad), (
        central, np.linalg.norm(grad))
