"""Parity of the smooth-dynamics position/velocity stages with MuJoCo 4.0 C, and the JAX
contract (jit, vmap, grad) of smooth.py, math.py, tree.py and support.py."""

from __future__ import annotations

import functools
import pathlib

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import interop, math, smooth, support, tree
from mjx_lite.io import make_data
from mjx_lite.types import JointType, ObjType, TrnType, WrapType

from conftest import GYM_ASSETS, MJX_TEST_DATA, REPO_ROOT
from parity import assert_close

jax.config.update("jax_enable_x64", True)

# Float64 parity with MuJoCo C; the pipelines differ only in operation order.
RTOL = 1e-9
# Central finite differences of qfrc_bias (step 1e-6) against jax.grad.
GRAD_RTOL = 1e-5
# Float32 pipeline against MuJoCo's float64 (a few hundred float32 ulps).
F32_RTOL = 1e-4

POS_FIELDS = (
    "xpos", "xquat", "xmat", "xipos", "ximat", "xanchor", "xaxis", "geom_xpos", "geom_xmat",
    "site_xpos", "site_xmat", "cam_xpos", "cam_xmat", "light_xpos", "light_xdir",
    "subtree_com", "cinert", "cdof", "crb", "qM", "qLDiagInv", "ten_length", "ten_J",
    "actuator_length", "actuator_moment",
)
VEL_FIELDS = (
    "cvel", "cdof_dot", "qfrc_bias", "subtree_linvel", "subtree_angmom", "ten_velocity",
    "actuator_velocity",
)

# Every joint type (several joints in one body, qpos0/ref offsets), a free body with a child,
# mocap, sites, cameras and lights in every mode, a fixed tendon and every transmission
# type that smooth.transmission computes.
FEATURES_XML = """
<mujoco>
  <worldbody>
    <light name="l0" pos="0 0 3" dir="0 1 -1"/>
    <light name="l1" mode="targetbody" target="b" pos="1 0 3"/>
    <light name="l2" mode="trackcom" pos="1 0 3"/>
    <light name="l3" mode="track" pos="1 0 3" dir="1 0 -1"/>
    <light name="l4" mode="targetbodycom" target="b" pos="1 0 3"/>
    <body name="a" pos="0 0 1" quat="0.9 0.1 0.2 0.3">
      <joint name="h" type="hinge" axis="0 1 1" pos="0 .1 0" ref="0.3"/>
      <joint name="s" type="slide" axis="1 0 0" ref=".2"/>
      <joint name="bb" type="ball" pos=".1 0 0"/>
      <geom type="box" pos=".1 .2 .3" quat="1 2 3 4" size=".1 .2 .3" mass="1"/>
      <site name="s1" pos=".1 .1 .1" quat="1 0 1 0"/>
      <camera name="c1" mode="targetbody" target="b" pos="1 0 0"/>
      <camera name="c2" mode="track" pos="1 0 0"/>
      <camera name="c3" mode="trackcom" pos="1 0 0"/>
      <camera name="c4" mode="fixed" pos="1 0 0" euler="10 20 30"/>
      <camera name="c5" mode="targetbodycom" target="b" pos="1 0 0"/>
      <body name="b" pos="0 .3 0">
        <joint name="sb" type="slide" axis="0 1 1"/>
        <joint name="fb" type="ball"/>
        <geom type="capsule" size=".1 .2" mass="1"/>
        <site name="s2" pos="0 .2 0"/>
        <body name="c" pos="0 0 .4">
          <joint name="hc" type="hinge" axis="1 0 0" pos="0 0 -.1" ref="-.4"/>
          <geom size=".1" mass="0.3" pos="0 0 .1"/>
          <site name="s3" pos="0 .1 0" euler="30 0 10"/>
        </body>
      </body>
    </body>
    <body name="f2" pos="1 0 0">
      <freejoint name="ff"/>
      <geom size=".1" mass="2"/>
      <body pos="0 0 .3" euler="0 40 0">
        <joint name="bf" type="ball" damping="1"/>
        <geom type="ellipsoid" size=".1 .2 .3" pos=".1 0 0"/>
        <body pos=".2 0 0">
          <geom type="cylinder" size=".05 .1" pos="0 0 .1"/>
          <joint name="sl" type="slide" axis="0 0 1"/>
        </body>
      </body>
    </body>
    <body name="m" mocap="true" pos="1 1 1" quat="1 .2 0 0">
      <geom size=".1" contype="0" conaffinity="0"/>
      <body name="mc" pos="0 0 .2"><joint name="hm" axis="0 1 0"/><geom size=".1"/></body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t"><joint joint="h" coef="1.5"/><joint joint="hc" coef="-0.5"/></fixed>
    <fixed name="t2"><joint joint="sl" coef="2"/></fixed>
  </tendon>
  <actuator>
    <motor joint="h" gear="2"/>
    <motor tendon="t" gear="3"/>
    <motor joint="bb" gear="1 2 3 0 0 0"/>
    <motor joint="fb" gear="1 2 3 0 0 0"/>
    <general joint="ff" gear="1 2 3 4 5 6"/>
    <general jointinparent="ff" gear="1 2 3 4 5 6"/>
    <general jointinparent="bb" gear="1 2 3 0 0 0"/>
    <general site="s3" gear="1 2 3 4 5 6"/>
    <general site="s3" refsite="s1" gear="1 2 3 4 5 6"/>
    <general cranksite="s3" slidersite="s1" cranklength="0.5"/>
    <general cranksite="s2" slidersite="s3" cranklength="0.01" gear="2"/>
    <position joint="sl" kp="10"/>
  </actuator>
</mujoco>
"""


def _pipeline(m, d, ten=None):
    d = smooth.kinematics(m, d)
    d = smooth.com_pos(m, d)
    d = smooth.tendon(m, d)
    if ten is not None:
        # spatial tendons belong to mjx_lite.tendon: the acceptance run feeds MuJoCo's
        d = d.replace(ten_length=ten[0], ten_J=ten[1])
    d = smooth.crb(m, d)
    d = smooth.factor_m(m, d)
    d = smooth.transmission(m, d)
    d = smooth.tendon_velocity(m, d)
    d = smooth.actuator_velocity(m, d)
    d = smooth.com_vel(m, d)
    d = smooth.rne(m, d)
    return smooth.subtree_vel(m, d)


class Case:
    """A MuJoCo model, our Model and one jitted pipeline shared by every state."""

    def __init__(self, mjm):
        self.mjm = mjm
        self.m = interop.model_from_mujoco(mjm)
        self.d0 = make_data(self.m)
        self.run = jax.jit(functools.partial(_pipeline, self.m))

    def state(self, rng, scale=0.3, normalize=True):
        """A random state: perturbed qpos (quaternions normalized unless told), random qvel,
        random mocap poses."""
        mjm = self.mjm
        qpos = np.array(mjm.qpos0) + scale * rng.standard_normal(mjm.nq)
        for j in range(mjm.njnt):
            adr = mjm.jnt_qposadr[j]
            if mjm.jnt_type[j] in (JointType.FREE, JointType.BALL):
                q = slice(adr + 3, adr + 7) if mjm.jnt_type[j] == JointType.FREE else \
                    slice(adr, adr + 4)
                if normalize:
                    qpos[q] /= np.linalg.norm(qpos[q])
        qvel = rng.standard_normal(mjm.nv)
        mpos = np.array(self.d0.mocap_pos) + 0.2 * rng.standard_normal((mjm.nmocap, 3))
        mquat = rng.standard_normal((mjm.nmocap, 4))  # MuJoCo normalizes these itself
        return qpos, qvel, mpos, mquat

    def reference(self, qpos, qvel, mpos, mquat):
        mjd = mujoco.MjData(self.mjm)
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
        mjd.mocap_pos[:], mjd.mocap_quat[:] = mpos, mquat
        mujoco.mj_forward(self.mjm, mjd)
        mujoco.mj_subtreeVel(self.mjm, mjd)
        return mjd

    def ours(self, qpos, qvel, mpos, mquat, ten=None):
        d = self.d0.replace(qpos=jp.asarray(qpos), qvel=jp.asarray(qvel),
                            mocap_pos=jp.asarray(mpos), mocap_quat=jp.asarray(mquat))
        return self.run(d) if ten is None else self.run(d, ten)


def _dense(values, rownnz, rowadr, colind, nrow, ncol) -> np.ndarray:
    """MuJoCo 4.0's compressed rows (actuator_moment, ten_J) as a dense array."""
    out = np.zeros((nrow, ncol))
    for i in range(nrow):
        a, n = rowadr[i], rownnz[i]
        out[i, colind[a:a + n]] = values[a:a + n]
    return out


def _ref_field(case, mjd, name):
    mjm = case.mjm
    if name == "qM":
        full = np.zeros((mjm.nv, mjm.nv))
        mujoco.mj_fullM(mjm, mjd, full)
        return full
    if name == "actuator_moment":
        return _dense(mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr,
                      mjd.moment_colind, mjm.nu, mjm.nv)
    if name == "ten_J":
        return _dense(mjd.ten_J, mjm.ten_J_rownnz, mjm.ten_J_rowadr, mjm.ten_J_colind,
                      mjm.ntendon, mjm.nv)
    value = np.array(getattr(mjd, name))
    if name in ("xmat", "ximat", "geom_xmat", "site_xmat", "cam_xmat"):
        value = value.reshape(-1, 3, 3)
    return value


def _spatial_tendons(mjm) -> np.ndarray:
    """Tendons with a spatial path (sites/geoms/pulleys): computed by mjx_lite.tendon."""
    out = np.zeros(mjm.ntendon, dtype=bool)
    for t in range(mjm.ntendon):
        adr, num = mjm.tendon_adr[t], mjm.tendon_num[t]
        out[t] = np.any(mjm.wrap_type[adr:adr + num] != WrapType.JOINT)
    return out


def _compared_actuators(mjm, spatial_given: bool) -> np.ndarray:
    """Actuators whose transmission smooth.transmission owns (not body/SO3, which the
    constraint stage owns; spatial tendons only when their length and J were given)."""
    spatial = _spatial_tendons(mjm)
    keep = ~np.isin(mjm.actuator_trntype, (TrnType.BODY, TrnType.SO3))
    ten = mjm.actuator_trntype == TrnType.TENDON
    if not spatial_given:
        keep[ten] &= ~spatial[mjm.actuator_trnid[ten, 0]]
    return keep


def compare(case, d, mjd, fields, rtol, errors=None, model="", spatial_given=False):
    """Compares fields of ours with MuJoCo's; records worst errors in ``errors``."""
    act = _compared_actuators(case.mjm, spatial_given)
    fixed = ~_spatial_tendons(case.mjm)
    for name in fields:
        ours = np.asarray(getattr(d, name))
        theirs = _ref_field(case, mjd, name)
        if name.startswith("actuator_"):
            ours, theirs = ours[act], theirs[act]
        if name.startswith("ten_"):
            ours, theirs = ours[fixed], theirs[fixed]
        if name == "qM":
            name_ = "full_m"
            ours = np.asarray(support.full_m(case.m, d))
        else:
            name_ = name
        err = assert_close(f"{model}:{name_}", ours, theirs, rtol)
        if errors is not None:
            errors[(name_, model)] = max(errors.get((name_, model), 0.0), err)


# ------------------------------------------------------------------------------------------
# CI tier


@pytest.fixture(scope="module")
def features():
    return Case(mujoco.MjModel.from_xml_string(FEATURES_XML))


@pytest.fixture(scope="module", params=["ant", "hopper", "humanoid"])
def gym_case(request):
    path = GYM_ASSETS / f"{request.param}.xml"
    return request.param, Case(mujoco.MjModel.from_xml_path(str(path)))


def test_features_parity(features):
    rng = np.random.default_rng(0)
    for _ in range(3):
        s = features.state(rng)
        compare(features, features.ours(*s), features.reference(*s), POS_FIELDS + VEL_FIELDS,
                RTOL, model="features")


def test_unnormalized_quaternions(features):
    """Free/ball quaternions are normalized inside kinematics; qpos itself is left as is."""
    rng = np.random.default_rng(1)
    qpos, qvel, mpos, mquat = features.state(rng, normalize=False)
    mjd = features.reference(qpos, qvel, mpos, mquat)
    np.testing.assert_array_equal(mjd.qpos, qpos)
    d = features.ours(qpos, qvel, mpos, mquat)
    np.testing.assert_array_equal(np.asarray(d.qpos), qpos)
    compare(features, d, mjd, POS_FIELDS + VEL_FIELDS, RTOL, model="features-unnormalized")


def test_gym_parity(gym_case):
    name, case = gym_case
    rng = np.random.default_rng(2)
    for _ in range(2):
        s = case.state(rng)
        compare(case, case.ours(*s), case.reference(*s), POS_FIELDS + VEL_FIELDS, RTOL,
                model=name)


def test_gravity_disabled():
    """The gravity disable bit (128 in MuJoCo 4.0) removes gravity from qfrc_bias."""
    xml = """<mujoco><option><flag gravity="disable"/></option><worldbody>
      <body pos="0 0 1"><joint type="ball"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/>
        <body pos=".3 0 0"><joint axis="0 1 0"/><geom size=".1" pos=".1 0 0"/></body></body>
      </worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    assert mjm.opt.disableflags & 128
    case = Case(mjm)
    s = case.state(np.random.default_rng(3))
    compare(case, case.ours(*s), case.reference(*s), ("qfrc_bias",), RTOL, model="nogravity")


def test_solve_and_mul(features):
    case = features
    rng = np.random.default_rng(4)
    s = case.state(rng)
    d, mjd = case.ours(*s), case.reference(*s)
    nv = case.mjm.nv
    x = rng.standard_normal((nv, 3))
    want = np.zeros((3, nv))
    mujoco.mj_solveM(case.mjm, mjd, want, np.ascontiguousarray(x.T))
    assert_close("solve_m (nv,k)", smooth.solve_m(case.m, d, jp.asarray(x)), want.T, RTOL)
    assert_close("solve_m (nv,)", support.solve_m(case.m, d, jp.asarray(x[:, 0])), want[0],
                 RTOL)
    prod = np.zeros(nv)
    mujoco.mj_mulM(case.mjm, mjd, prod, x[:, 0])
    assert_close("mul_m", support.mul_m(case.m, d, jp.asarray(x[:, 0])), prod, RTOL)
    assert support.mul_m(case.m, d, jp.asarray(x)).shape == (nv, 3)
    # the tree-sparse reference factorization agrees with the dense one in use
    qld, dinv = smooth.factor_m_ltdl(case.m, d.qM)
    assert_close("qLD ltdl vs dense", qld, d.qLD, RTOL)
    assert_close("qLDiagInv ltdl", dinv, mjd.qLDiagInv, RTOL)


def test_jac_matches_mj_jac(features):
    case = features
    s = case.state(np.random.default_rng(5))
    d, mjd = case.ours(*s), case.reference(*s)
    point = np.array([0.3, -0.2, 0.5])
    for body in range(case.mjm.nbody):
        jacp, jacr = np.zeros((3, case.mjm.nv)), np.zeros((3, case.mjm.nv))
        mujoco.mj_jac(case.mjm, mjd, jacp, jacr, point, body)
        ours_p, ours_r = support.jac(case.m, d, jp.asarray(point), body)
        assert_close(f"jacp body {body}", ours_p, jacp, RTOL)
        assert_close(f"jacr body {body}", ours_r, jacr, RTOL)
    # traced body id and batched points
    f = jax.jit(jax.vmap(lambda p, b: support.jac(case.m, d, p, b)))
    bodies = np.arange(case.mjm.nbody)
    pts = np.tile(point, (case.mjm.nbody, 1))
    bp, br = f(jp.asarray(pts), jp.asarray(bodies))
    for body in bodies:
        jacp, jacr = np.zeros((3, case.mjm.nv)), np.zeros((3, case.mjm.nv))
        mujoco.mj_jac(case.mjm, mjd, jacp, jacr, point, body)
        assert_close("jacp vmapped", bp[body], jacp, RTOL)
        assert_close("jacr vmapped", br[body], jacr, RTOL)


def test_name_lookup(features):
    mjm, m = features.mjm, features.m
    for kind, obj, n in (("body", ObjType.BODY, mjm.nbody), ("jnt", ObjType.JOINT, mjm.njnt),
                         ("site", ObjType.SITE, mjm.nsite), ("cam", ObjType.CAMERA, mjm.ncam),
                         ("actuator", ObjType.ACTUATOR, mjm.nu),
                         ("tendon", ObjType.TENDON, mjm.ntendon)):
        for i in range(n):
            name = mujoco.mj_id2name(mjm, obj.value, i)
            assert support.id2name(m, kind, i) == name
            assert support.id2name(m, obj, i) == name
            if name:
                assert support.name2id(m, kind, name) == i
                assert support.name2id(m, int(obj), name) == i
    assert support.name2id(m, "joint", "hc") == mujoco.mj_name2id(mjm, ObjType.JOINT, "hc")
    assert support.name2id(m, "body", "nope") == -1
    assert support.id2name(m, "body", 999) is None
    with pytest.raises(ValueError):
        support.name2id(m, "bogus", "a")


@pytest.fixture(scope="module")
def ant_case():
    return Case(mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "ant.xml")))


def test_jit_vmap_64_states(ant_case):
    name, case = "ant", ant_case
    rng = np.random.default_rng(6)
    states = [case.state(rng) for _ in range(64)]
    batch = [jp.asarray(np.stack(x)) for x in zip(*states, strict=True)]
    f = jax.jit(jax.vmap(lambda q, v, mp, mq: _pipeline(case.m, case.d0.replace(
        qpos=q, qvel=v, mocap_pos=mp, mocap_quat=mq))))
    out = f(*batch)
    for i in (0, 17, 63):
        one = jax.tree.map(lambda x, i=i: x[i], out)
        compare(case, one, case.reference(*states[i]), ("xpos", "cinert", "qM", "qfrc_bias",
                                                        "actuator_moment"), RTOL, model=name)


def test_float32(ant_case):
    """The pipeline keeps float32 inputs float32 (no silent promotion) and stays accurate."""
    case = ant_case
    f32 = lambda x: x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x  # noqa: E731
    m32 = jax.tree.map(f32, case.m)
    s = case.state(np.random.default_rng(13))
    d = case.d0.replace(qpos=jp.asarray(s[0]), qvel=jp.asarray(s[1]))
    out = jax.jit(_pipeline)(m32, jax.tree.map(f32, d))
    mjd = case.reference(*s)
    for name in ("xpos", "cinert", "qM", "qLDiagInv", "cvel", "qfrc_bias", "actuator_moment"):
        assert getattr(out, name).dtype == jp.float32, name
    compare(case, out, mjd, ("xpos", "xquat", "cinert", "cdof", "qM", "cvel", "qfrc_bias"),
            F32_RTOL, model="ant-float32")


def test_grad_vs_finite_differences(features):
    """jax.grad of a scalar of qfrc_bias (plus actuator_length and subtree_angmom) w.r.t. qpos
    against central differences; and finite gradients at qpos0 with zero qvel (identity
    quaternions, zero angular velocity), where safe norms matter. One compiled gradient."""
    case = features
    rng = np.random.default_rng(7)
    qpos, qvel, mpos, mquat = case.state(rng)
    w = jp.asarray(rng.standard_normal(case.mjm.nv))
    u = jp.asarray(rng.standard_normal(case.mjm.nu))

    def scalar(q, v):
        d = case.d0.replace(qpos=q, qvel=v, mocap_pos=jp.asarray(mpos),
                            mocap_quat=jp.asarray(mquat))
        d = _pipeline(case.m, d)
        return jp.dot(w, d.qfrc_bias) + jp.dot(u, d.actuator_length) + jp.sum(d.subtree_angmom)

    grad = jax.jit(jax.grad(scalar, argnums=(0, 1)))
    f = jax.jit(scalar)
    g = np.asarray(grad(jp.asarray(qpos), jp.asarray(qvel))[0])
    eps = 1e-6
    fd = np.zeros_like(qpos)
    for i in range(len(qpos)):
        e = np.zeros_like(qpos)
        e[i] = eps
        fd[i] = (float(f(jp.asarray(qpos + e), jp.asarray(qvel)))
                 - float(f(jp.asarray(qpos - e), jp.asarray(qvel)))) / (2 * eps)
    assert np.all(np.isfinite(g))
    assert_close("grad qfrc_bias", g, fd, GRAD_RTOL)
    g0 = grad(jp.asarray(case.mjm.qpos0), jp.zeros(case.mjm.nv))
    assert all(np.all(np.isfinite(np.asarray(x))) for x in g0)


def test_kinematics_derivative_rule(features):
    """The kinematic tree's custom derivatives (smooth._tree_poses and _chain_poses:
    closed-form velocity kinematics) against central differences, forward and reverse mode,
    w.r.t. qpos (free,
    ball, hinge and slide joints, unnormalized quaternions), the mocap poses and the Model's
    body_pos and body_quat, on every pose kinematics outputs."""
    case = features
    rng = np.random.default_rng(11)
    qpos, _, mpos, mquat = case.state(rng, normalize=False)
    m = case.m

    def poses(q, mp, mq, bpos, bquat):
        d = case.d0.replace(qpos=q, mocap_pos=mp, mocap_quat=mq)
        d = smooth.kinematics(m.replace(body_pos=bpos, body_quat=bquat), d)
        return jp.concatenate([jp.ravel(getattr(d, f)) for f in (
            "xpos", "xquat", "xmat", "xipos", "xanchor", "xaxis", "geom_xpos", "geom_xmat",
            "site_xpos", "subtree_com")])

    args = [jp.asarray(x) for x in (qpos, mpos, mquat, m.body_pos, m.body_quat)]
    f = jax.jit(poses)
    # the state alone takes smooth._tree_poses' closed form; with the Model's geometry the
    # composition's own derivative
    fwd, rev = [], []
    for argnums in ((0, 1, 2), (3, 4)):
        fwd += jax.jit(jax.jacfwd(poses, argnums=argnums))(*args)
        rev += jax.jit(jax.jacrev(poses, argnums=argnums))(*args)
    eps = 1e-6
    for k, x in enumerate(args):
        flat = np.asarray(x).ravel()
        fd = np.zeros((f(*args).shape[0], flat.size))
        for i in range(flat.size):
            e = np.zeros_like(flat)
            e[i] = eps

            def at(step, k=k, x=x, e=e, flat=flat):
                moved = jp.asarray((flat + step * e).reshape(x.shape))
                return np.asarray(f(*[moved if j == k else a for j, a in enumerate(args)]))

            fd[:, i] = (at(1.0) - at(-1.0)) / (2 * eps)
        assert np.abs(fd).max() > 0.1
        assert_close(f"jacfwd arg {k}", np.asarray(fwd[k]).reshape(fd.shape), fd, GRAD_RTOL)
        assert_close(f"jacrev arg {k}", np.asarray(rev[k]).reshape(fd.shape), fd, GRAD_RTOL)


# ------------------------------------------------------------------------------------------
# math and tree helpers


def test_quaternion_helpers():
    rng = np.random.default_rng(9)
    for _ in range(5):
        q = rng.standard_normal(4)
        q /= np.linalg.norm(q)
        p = rng.standard_normal(4)
        p /= np.linalg.norm(p)
        v = rng.standard_normal(3)
        want = np.zeros(4)
        mujoco.mju_mulQuat(want, q, p)
        assert_close("quat_mul", math.quat_mul(jp.asarray(q), jp.asarray(p)), want, 1e-14)
        want = np.zeros(3)
        mujoco.mju_rotVecQuat(want, v, q)
        assert_close("rotate", math.rotate(jp.asarray(v), jp.asarray(q)), want, 1e-14)
        want = np.zeros(9)
        mujoco.mju_quat2Mat(want, q)
        assert_close("quat_to_mat", math.quat_to_mat(jp.asarray(q)), want.reshape(3, 3), 1e-14)
        back = np.zeros(4)
        mujoco.mju_mat2Quat(back, want)
        assert_close("mat_to_quat", math.mat_to_quat(jp.asarray(want.reshape(3, 3))), back,
                     1e-13)
        want = q.copy()
        mujoco.mju_quatIntegrate(want, v, 0.7)
        assert_close("quat_integrate", math.quat_integrate(jp.asarray(q), jp.asarray(v), 0.7),
                     want, 1e-14)
        want = np.zeros(3)
        mujoco.mju_quat2Vel(want, q, 0.3)
        assert_close("quat_to_vel", math.quat_to_vel(jp.asarray(q), 0.3), want, 1e-13)
        axis = v / np.linalg.norm(v)
        want = np.zeros(4)
        mujoco.mju_axisAngle2Quat(want, axis, 1.3)
        assert_close("axis_angle", math.axis_angle_to_quat(jp.asarray(axis), 1.3), want, 1e-14)
        assert_close("quat_conj", math.quat_mul(jp.asarray(q), math.quat_conj(jp.asarray(q))),
                     np.array([1.0, 0, 0, 0]), 1e-14)
    # degenerate inputs: zero quaternion -> identity; zero angular velocity keeps q
    assert_close("normalize 0", math.quat_normalize(jp.zeros(4)), [1.0, 0, 0, 0], 0)
    q = jp.asarray([0.5, 0.5, 0.5, 0.5])
    assert_close("integrate 0", math.quat_integrate(q, jp.zeros(3), 1.0), q, 1e-15)


def test_spatial_helpers():
    """Spatial algebra against its definitions: crossMotion is the 6x6 matrix [w]x, [v]x; [w]x
    acting on motions, crossForce its negative transpose; mju_mulInertVec is checked through
    qM and qfrc_bias in the parity tests."""
    rng = np.random.default_rng(10)
    v, u = rng.standard_normal(6), rng.standard_normal(6)

    def skew(a):
        return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])

    w, vl = skew(v[:3]), skew(v[3:])
    motion = np.block([[w, np.zeros((3, 3))], [vl, w]])
    assert_close("motion_cross", math.motion_cross(jp.asarray(v), jp.asarray(u)), motion @ u,
                 1e-14)
    assert_close("force_cross", math.force_cross(jp.asarray(v), jp.asarray(u)), -motion.T @ u,
                 1e-14)
    # inertia of a point mass m at offset c: angular I = m(|c|^2 - cc'), linear m
    mass, c = 1.7, rng.standard_normal(3)
    full = mass * (c @ c * np.eye(3) - np.outer(c, c))
    inert = np.r_[full[0, 0], full[1, 1], full[2, 2], full[0, 1], full[0, 2], full[1, 2],
                  mass * c, mass]
    spatial = np.block([[full, mass * skew(c)], [-mass * skew(c), mass * np.eye(3)]])
    assert_close("inert_mul", math.inert_mul(jp.asarray(inert), jp.asarray(v)), spatial @ v,
                 1e-14)
    got = math.inert_com(jp.zeros(3), jp.eye(3), jp.asarray(c), mass)
    assert_close("inert_com", got, inert, 1e-14)
    new, old = rng.standard_normal(3), rng.standard_normal(3)
    want = np.zeros(6)
    for flg, fn in ((0, math.transform_motion), (1, math.transform_force)):
        mujoco.mju_transformSpatial(want, v, flg, new, old, np.eye(3).ravel())
        assert_close(f"transform {flg}", fn(jp.asarray(v), jp.asarray(new), jp.asarray(old)),
                     want, 1e-14)


def test_safe_gradients():
    g = jax.grad(lambda x: math.safe_norm(x))(jp.zeros(3))
    assert np.all(np.asarray(g) == 0)
    g = jax.grad(lambda x: jp.sum(math.normalize(x)))(jp.zeros(3))
    assert np.all(np.isfinite(np.asarray(g)))
    g = jax.grad(lambda x: math.safe_div(1.0, x))(0.0)
    assert np.isfinite(float(g))
    g = jax.grad(lambda x: jp.sum(math.quat_to_vel(x)))(jp.asarray([1.0, 0, 0, 0]))
    assert np.all(np.isfinite(np.asarray(g)))
    g = jax.grad(lambda v: jp.sum(math.quat_integrate(jp.asarray([1.0, 0, 0, 0]), v, 0.1)))(
        jp.zeros(3))
    assert np.all(np.isfinite(np.asarray(g)))


@pytest.mark.parametrize("idx", [np.array([0, 0, 3, 1]), np.array([[1, 1], [0, 1]]),
                                 np.array([2, 1, 0]), np.zeros(0, np.int32)])
def test_static_gathers_transpose_to_gathers(idx):
    """math.take / pick / spread / put equal numpy-style indexing in value, first and second
    derivatives (both modes) and under vmap at every axis, and reverse mode through them
    has no scatter (their transposes are gathers)."""
    rng = np.random.default_rng(3)
    x = jp.asarray(rng.standard_normal((5, 2, 3)))
    pairs = {
        "take": (lambda x: math.take(x, idx), lambda x: x[idx]),
        "pick": (lambda x: math.pick(jp.moveaxis(x, 0, -1), idx),
                 lambda x: jp.moveaxis(x, 0, -1)[..., idx]),
        "spread": (lambda x: math.spread(math.take(x, idx), idx, 6),
                   lambda x: jp.zeros((6, 2, 3)).at[idx].add(x[idx])),
        "put": (lambda x: math.put(x, np.unique(idx), 2 * x[:len(np.unique(idx))]),
                lambda x: x.at[np.unique(idx)].set(2 * x[:len(np.unique(idx))])),
    }
    def loss_of(f):
        return lambda x: jp.sum(jp.sin(f(x)) ** 2)

    for name, (ours, ref) in pairs.items():
        loss, loss_ref = loss_of(ours), loss_of(ref)
        assert_close(name, ours(x), ref(x), 0.0)
        assert_close(name + " grad", jax.grad(loss)(x), jax.grad(loss_ref)(x), 1e-15)
        assert_close(name + " jacfwd", jax.jacfwd(ours)(x), jax.jacfwd(ref)(x), 0.0)
        assert_close(name + " hessian", jax.jacrev(jax.grad(loss))(x),
                     jax.jacfwd(jax.grad(loss_ref))(x), 1e-14)
        xs = jp.stack([x, -x, 2 * x])
        for axis in range(4):
            xa = jp.moveaxis(xs, 0, axis)
            assert_close(f"{name} vmap {axis}", jax.vmap(jax.grad(loss), axis, axis)(xa),
                         jax.vmap(jax.grad(loss_ref), axis, axis)(xa), 1e-15)
        assert "scatter" not in str(jax.make_jaxpr(jax.grad(loss))(x)), name


def test_tree_scans(features):
    m = features.m
    parent = np.asarray(m.body_parentid)
    x = np.random.default_rng(11).standard_normal((m.nbody, 2))
    want_up = x.copy()
    for i in range(m.nbody - 1, 0, -1):
        want_up[parent[i]] += want_up[i]
    assert_close("scan_up", tree.scan_up(m, jp.asarray(x)), want_up, 1e-14)
    want_down = x.copy()
    want_down[0] = 0.0
    for i in range(1, m.nbody):
        want_down[i] = want_down[parent[i]] * 0.5 + x[i]
    got = tree.scan_down(m, lambda p, loc: 0.5 * p + loc, jp.asarray(x), jp.zeros(2))
    assert_close("scan_down", got, want_down, 1e-14)
    # one op per level, not per body
    assert len(tree.levels(m)) == int(np.max(m.body_depth))


# ------------------------------------------------------------------------------------------
# acceptance tier: every model MuJoCo compiles, 5 random states each

ACCEPT_FIELDS = (
    "xpos", "xquat", "xmat", "xipos", "cinert", "cdof", "cvel", "subtree_com", "qM",
    "qfrc_bias", "actuator_length", "actuator_moment",
)


def _all_models() -> list[pathlib.Path]:
    paths = sorted(GYM_ASSETS.glob("*.xml")) + sorted(MJX_TEST_DATA.rglob("*.xml"))
    return paths


def _write_acceptance(errors: dict, skipped: list) -> None:
    out = REPO_ROOT / "tests" / "acceptance" / "smooth.txt"
    out.parent.mkdir(exist_ok=True)
    rows = sorted(errors.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    lines = [f"{f} {mdl} {e:.3e}" for (f, mdl), e in rows]
    lines += [f"# not compared: {s}" for s in skipped]
    out.write_text("\n".join(lines) + "\n")


@pytest.mark.acceptance
def test_acceptance_all_models():
    errors: dict = {}
    skipped = []
    for path in _all_models():
        try:
            mjm = mujoco.MjModel.from_xml_path(str(path))
        except Exception as e:  # noqa: BLE001 - some test assets are fragments or need plugins
            skipped.append(f"{path.name}: MuJoCo does not compile it: {str(e).splitlines()[0]}")
            continue
        case = Case(mjm)
        label = str(path.relative_to(path.parents[1]))
        fields = ACCEPT_FIELDS
        if np.any(_spatial_tendons(mjm) & (mjm.tendon_armature > 0)):
            # the bias term J' armature Jdot qvel of spatial tendons is added by
            # forward.fwd_velocity, not smooth.rne: tests/test_tendon.py and the forward
            # acceptance (tests/acceptance/smooth_dynamics.txt) compare it
            fields = tuple(f for f in fields if f != "qfrc_bias")
            skipped.append(f"{label}: qfrc_bias here (spatial tendon armature: compared by "
                           "test_tendon and smooth_dynamics.txt)")
        rng = np.random.default_rng(12)
        for _ in range(5):
            s = case.state(rng)
            mjd = case.reference(*s)
            ten = None
            if _spatial_tendons(mjm).any():
                ten = (jp.asarray(mjd.ten_length), jp.asarray(_ref_field(case, mjd, "ten_J")))
            d = case.ours(*s, ten=ten)
            compare(case, d, mjd, fields, 1e-8, errors, model=label, spatial_given=True)
        # written after every model so that a partial run still leaves its measurements
        _write_acceptance(errors, skipped)
        print(f"acceptance smooth: {label} ok", flush=True)
