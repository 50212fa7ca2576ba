"""Parity of sensor.py (position, velocity and actuator-force sensors, every frame-sensor
object and reference type, site and camera rangefinders, camprojection, geom
distance/normal/fromto, energy, touch/force/torque, contact sensors with every matching and
reduce mode, cutoff, the sensor disable bit) with MuJoCo 4.0 C, and the sensor rows (C, D) of
transition_jacobians against mjd_transitionFD."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from lxml import etree

from mjx_lite import interop, sensor
from mjx_lite.types import SensorType

from conftest import MJX_TEST_DATA

jax.config.update("jax_enable_x64", True)

# Float64 parity (measured <= 3e-16): the same formulas in a different operation order.
RTOL = 1e-6
# Sensors reading contact / constraint forces of our own solve (measured 1e-9: the solver's
# convergence, not the sensor formulas).
RTOL_CONTACT = 1e-4
# d.energy with the energy flag (measured 7e-15 absolute).
ENERGY_ATOL = 1e-8
ACCEPTANCE_FILE = pathlib.Path(__file__).parent / "acceptance" / "sensor.txt"

# Sensor elements computed on MuJoCo's state (force and torque read its cfrc_int); touch
# needs our own contact forces (CONTACT_XML, full forward) and is removed from the wheel's
# models here, as are contact sensors (they need our own contacts: tested below).
SUPPORTED = {
    "rangefinder", "camprojection", "force", "torque", "distance", "normal", "fromto",
    "e_potential", "e_kinetic",
    "magnetometer", "jointpos", "tendonpos", "actuatorpos", "ballquat", "framepos",
    "framequat", "framexaxis", "frameyaxis", "framezaxis", "subtreecom", "clock",
    "insidesite", "velocimeter", "gyro", "jointvel", "tendonvel", "actuatorvel",
    "ballangvel", "framelinvel", "frameangvel", "subtreelinvel", "subtreeangmom",
    "actuatorfrc", "jointactuatorfrc", "tendonactuatorfrc", "accelerometer", "framelinacc",
    "frameangacc",
}

KINDS = ("body", "xbody", "geom", "site", "camera")
FRAME_SENSORS = ("framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis",
                 "framelinvel", "frameangvel")


def _frame_block() -> str:
    """Every frame sensor for every object kind against every reference kind (and none)."""
    names = {"body": "b2", "xbody": "b1", "geom": "g2", "site": "s2", "camera": "c2"}
    refs = {"body": "b1", "xbody": "b2", "geom": "g1", "site": "s1", "camera": "c1"}
    lines = []
    for s in FRAME_SENSORS:
        for k in KINDS:
            lines.append(f'<{s} objtype="{k}" objname="{names[k]}"/>')
            for r in KINDS:
                lines.append(f'<{s} objtype="{k}" objname="{names[k]}" reftype="{r}" '
                             f'refname="{refs[r]}"/>')
    for k in KINDS:
        lines.append(f'<framelinacc objtype="{k}" objname="{names[k]}"/>')
        lines.append(f'<frameangacc objtype="{k}" objname="{names[k]}"/>')
    return "\n".join(lines)


INLINE_XML = f"""
<mujoco>
  <option magnetic="0.1 -0.3 0.4"/>
  <worldbody>
    <site name="box_site" type="box" size=".3 .2 .4" pos=".1 0 .5"/>
    <site name="sph_site" type="sphere" size=".6" pos="0 0 .5"/>
    <site name="cap_site" type="capsule" size=".2 .3" pos="0 .2 .6" euler="30 0 0"/>
    <site name="ell_site" type="ellipsoid" size=".3 .5 .2" pos="0 0 .7"/>
    <site name="cyl_site" type="cylinder" size=".3 .2" pos=".2 0 .5"/>
    <body name="b1" pos="0 0 .5" quat="0.9 0.1 0.2 0.3">
      <joint name="ball" type="ball"/>
      <geom name="g1" type="box" size=".1 .2 .05" pos=".1 0 0" quat="1 1 0 0"/>
      <site name="s1" pos=".1 .1 0" euler="10 20 30"/>
      <camera name="c1" pos=".2 0 .1" euler="0 30 0"/>
      <body name="b2" pos=".3 0 0">
        <joint name="h" type="hinge" axis="0 1 1" range="-1 1"/>
        <joint name="sl" type="slide" axis="1 0 0"/>
        <geom name="g2" type="capsule" size=".05" fromto="0 0 0 .3 .1 0"/>
        <site name="s2" pos=".2 0 .1" euler="40 0 10"/>
        <camera name="c2" pos=".1 .1 .1" euler="20 0 50"/>
        <site name="t0" pos=".3 0 0"/>
      </body>
    </body>
    <body name="free" pos="0 .5 1">
      <freejoint/>
      <geom name="ball" type="sphere" size=".1"/>
      <site name="t1"/>
      <site name="ray_free" pos="0 0 .12" euler="100 0 0"/>
    </body>
    <camera name="eye" pos="0 -2 1" xyaxes="1 0 0 0 .5 1" resolution="64 48" fovy="50"/>
    <site name="ray_world" pos="0 -.5 .6" euler="-90 0 0"/>
  </worldbody>
  <tendon>
    <fixed name="fix"><joint joint="h" coef="2"/><joint joint="sl" coef="-1"/></fixed>
    <spatial name="spa"><site site="s1"/><site site="t0"/><site site="t1"/></spatial>
  </tendon>
  <actuator>
    <motor name="m_h" joint="h" gear="3"/>
    <motor name="m_fix" tendon="fix" gear="2"/>
    <position name="p_fix" tendon="fix" kp="5"/>
    <motor name="m_spa" tendon="spa"/>
  </actuator>
  <sensor>
    {_frame_block()}
    <magnetometer site="s2"/>
    <velocimeter site="s2"/>
    <accelerometer site="s2"/>
    <gyro site="s2" cutoff="0.5"/>
    <jointpos joint="h"/><jointpos joint="sl" cutoff="0.01"/>
    <jointvel joint="h" cutoff="0.2"/>
    <ballquat joint="ball"/><ballangvel joint="ball"/>
    <tendonpos tendon="fix"/><tendonpos tendon="spa"/>
    <tendonvel tendon="fix"/><tendonvel tendon="spa"/>
    <actuatorpos actuator="m_fix"/><actuatorvel actuator="m_spa"/>
    <actuatorfrc actuator="p_fix" cutoff="0.3"/>
    <jointactuatorfrc joint="h"/>
    <tendonactuatorfrc tendon="fix"/><tendonactuatorfrc tendon="spa"/>
    <subtreecom body="b1"/><subtreelinvel body="b1"/><subtreeangmom body="b1"/>
    <subtreeangmom body="world"/>
    <clock/>
    <insidesite site="box_site" objtype="site" objname="s2"/>
    <insidesite site="sph_site" objtype="body" objname="b2"/>
    <insidesite site="cap_site" objtype="xbody" objname="b2"/>
    <insidesite site="ell_site" objtype="geom" objname="g2"/>
    <insidesite site="cyl_site" objtype="camera" objname="c2"/>
    <rangefinder site="ray_world"/><rangefinder site="ray_world" cutoff=".7"/>
    <rangefinder site="ray_free" data="dist dir origin point depth"/>
    <camprojection site="s2" camera="eye"/><camprojection site="t1" camera="c1"/>
    <distance geom1="g1" geom2="ball" cutoff="1"/><distance geom1="g2" geom2="ball" cutoff=".2"/>
    <normal geom1="ball" body2="b1" cutoff="2"/><fromto body1="b2" geom2="ball" cutoff="2"/>
    <fromto geom1="g1" geom2="ball" cutoff=".05"/>
    <e_potential/><e_kinetic/>
    <force site="s2"/><torque site="s2"/><force site="s1"/><torque site="t1"/>
  </sensor>
</mujoco>
"""


def _strip(path: pathlib.Path) -> str:
    root = etree.parse(str(path)).getroot()
    for block in root.iter("sensor"):
        for child in list(block):
            if isinstance(child.tag, str) and child.tag not in SUPPORTED:
                block.remove(child)
    return etree.tostring(root).decode()


def _pipeline(m):
    return jax.jit(lambda d: sensor.sensor_acc(m, sensor.sensor_vel(m, sensor.sensor_pos(m, d))))


def _ours(mjm, mjd, m, fn) -> np.ndarray:
    """Our sensordata from MuJoCo's state (fn: a sensor pipeline or the full forward)."""
    d = interop.data_from_mujoco(mjm, mjd, m)
    return np.asarray(fn(d.replace(sensordata=jp.zeros_like(d.sensordata))).sensordata)


# A field whose largest value is below this is zero up to rounding (a torque sensor on a body
# that only slides reads 9e-16 in MuJoCo): judged by its absolute error, as an all-zero field.
ZERO_FLOOR = 1e-12


class Worst:
    """Relative error per sensor type over many states, as the project defines it:
    max|ours - ref| <= r x max|ref| over the type's values in every state (<= r where ref is
    all zero, see ZERO_FLOOR). Per type, not per sensor: a sensor whose true value is 0 (a
    frame's velocity relative to itself) reads rounding noise in both engines."""

    def __init__(self, mjm):
        self.mjm = mjm
        self.err = np.zeros(mjm.nsensordata)
        self.ref = np.zeros(mjm.nsensordata)

    def add(self, ours: np.ndarray, ref: np.ndarray) -> None:
        self.err = np.maximum(self.err, np.abs(ours - ref))
        self.ref = np.maximum(self.ref, np.abs(ref))

    def per_type(self) -> dict:
        err, ref = {}, {}
        for i, t in enumerate(self.mjm.sensor_type):
            a, n = self.mjm.sensor_adr[i], self.mjm.sensor_dim[i]
            k = SensorType(t).name
            err[k] = max(err.get(k, 0.0), self.err[a:a + n].max())
            ref[k] = max(ref.get(k, 0.0), self.ref[a:a + n].max())
        return {k: err[k] / ref[k] if ref[k] > ZERO_FLOOR else err[k] for k in sorted(err)}

    def bad(self, contact: bool = False) -> list[str]:
        """Types beyond RTOL (RTOL_CONTACT for contact-dependent types if ``contact``)."""
        loose = {t.name for t in _CONTACT_TYPES} if contact else set()
        return [f"{k} {v:.2e}" for k, v in self.per_type().items()
                if not v <= (RTOL_CONTACT if k in loose else RTOL)]


def _worst(mjm, m, fn, states) -> Worst:
    acc = Worst(mjm)
    for mjd in states:
        acc.add(_ours(mjm, mjd, m, fn), mjd.sensordata)
    return acc


def _random_states(mjm, mjd, count, seed, steps=0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        mujoco.mj_resetData(mjm, mjd)
        mjd.qpos[:] = mjm.qpos0 + 0.5 * rng.normal(size=mjm.nq)
        mjd.qvel[:] = rng.normal(size=mjm.nv)
        mjd.ctrl[:] = rng.normal(size=mjm.nu)
        mjd.time = rng.uniform(0, 3)
        for _ in range(steps):
            mujoco.mj_step(mjm, mjd)
        # MuJoCo 4.0 with the energy flag: once mjData.flg_energyvel is set (first forward
        # after a reset) it is never cleared, and the e_kinetic sensor then repeats the
        # previous call's energy[1] (measured). mjx_lite reports the current kinetic energy,
        # which is what MuJoCo computes with the flag cleared.
        mjd.flg_energyvel = 0
        mujoco.mj_forward(mjm, mjd)
        yield mjd


@pytest.fixture(scope="module")
def inline():
    mjm = mujoco.MjModel.from_xml_string(INLINE_XML)
    m = interop.model_from_mujoco(mjm)
    return mjm, m, _pipeline(m)


def test_inline_every_type_and_reftype(inline):
    mjm, m, fn = inline
    mjd = mujoco.MjData(mjm)
    bad = _worst(mjm, m, fn, _random_states(mjm, mjd, 4, seed=0)).bad()
    assert not bad, bad


def test_insidesite_both_outcomes(inline):
    """The insidesite states sampled include both inside (1) and outside (0)."""
    mjm, m, fn = inline
    mjd = mujoco.MjData(mjm)
    ids = np.nonzero(mjm.sensor_type == SensorType.INSIDESITE)[0]
    seen = set()
    for _ in _random_states(mjm, mjd, 12, seed=1):
        seen |= set(mjd.sensordata[mjm.sensor_adr[ids]].tolist())
    assert seen == {0.0, 1.0}


def test_wheel_sensor_model():
    path = MJX_TEST_DATA / "sensor" / "sensor.xml"
    mjm = mujoco.MjModel.from_xml_string(_strip(path))
    m = interop.model_from_mujoco(mjm)
    fn = _pipeline(m)
    mjd = mujoco.MjData(mjm)
    bad = _worst(mjm, m, fn, _random_states(mjm, mjd, 3, seed=2)).bad()
    assert not bad, bad


def test_disable_bit_leaves_sensordata():
    xml = INLINE_XML.replace("<option ", '<option><flag sensor="disable"/></option><option ')
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mujoco.MjData(mjm), m)
    d = d.replace(sensordata=jp.full_like(d.sensordata, 7.0))
    out = sensor.sensor_vel(m, sensor.sensor_pos(m, d))
    np.testing.assert_array_equal(np.asarray(out.sensordata), 7.0)


def test_grad_and_vmap(inline):
    """Sensors are differentiable in qpos (finite everywhere) and batch under vmap."""
    mjm, m, fn = inline
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    d0 = interop.data_from_mujoco(mjm, mjd, m)
    ids = np.nonzero(mjm.sensor_type == SensorType.FRAMEPOS)[0]
    adr = mjm.sensor_adr[ids]

    def framepos(xpos):
        return jp.sum(sensor.sensor_pos(m, d0.replace(xpos=xpos)).sensordata[adr])

    g = jax.jit(jax.grad(framepos))(d0.xpos)
    assert np.all(np.isfinite(np.asarray(g)))
    batch = jax.vmap(lambda t: fn(d0.replace(time=t)).sensordata)(jp.arange(3.0))
    clock = mjm.sensor_adr[np.nonzero(mjm.sensor_type == SensorType.CLOCK)[0][0]]
    np.testing.assert_array_equal(np.asarray(batch[:, clock]), [0.0, 1.0, 2.0])


@pytest.mark.acceptance
def test_sensor_acceptance():
    """Every sensor type against MuJoCo 4.0, float64, relative error per sensor as the
    project defines it (max|ours - ref| <= r x max|ref| over the sensor's values and states):
    the sensor stages alone on MuJoCo's state (the wheel's sensor models without touch, the
    inline every-type model, energy; 5 states after 200 steps from random qpos/qvel/ctrl),
    then our full forward (collision, solve, rne_post_constraint) on the contact model and on
    the wheel's sensor.xml with its touch sensors (5 states after 200 steps from rest with
    random controls, contacts active). Contact-dependent sensors within 1e-4, the rest 1e-6."""
    lines = ["# sensor.py vs MuJoCo 4.0, float64: max|ours - ref| / max|ref| per sensor type",
             "# (over its values and states; the absolute error where ref is all zero);",
             "# asserted per type: 1e-6, or 1e-4 for contact-dependent types",
             "## sensor stages at MuJoCo's state, 5 states after 200 mj_step from random "
             "qpos/qvel/ctrl"]
    models = [(p.name, mujoco.MjModel.from_xml_string(_strip(p)))
              for p in sorted((MJX_TEST_DATA / "sensor").glob("*.xml"))]
    models.append(("inline_every_type", mujoco.MjModel.from_xml_string(INLINE_XML)))
    models.append(("energy", mujoco.MjModel.from_xml_string(ENERGY_XML)))
    for name, mjm in models:
        if not mjm.nsensor:
            lines.append(f"{name}: no sensors")
            continue
        m = interop.model_from_mujoco(mjm)
        mjd = mujoco.MjData(mjm)
        acc = _worst(mjm, m, _pipeline(m), _random_states(mjm, mjd, 5, seed=4, steps=200))
        lines.append(f"{name}: " + ", ".join(f"{k} {v:.1e}" for k, v in acc.per_type().items()))
        assert not acc.bad(), (name, acc.bad())
    lines.append("## full forward (our contacts and solve), 5 states after 200 steps from rest "
                 f"with random controls; {RTOL_CONTACT:g} for "
                 f"{', '.join(t.name for t in _CONTACT_TYPES)}")
    wheel = MJX_TEST_DATA / "sensor" / "sensor.xml"
    full = [("contact_model", mujoco.MjModel.from_xml_string(CONTACT_XML)),
            ("sensor.xml (with touch)", mujoco.MjModel.from_xml_path(str(wheel)))]
    for name, mjm in full:
        m = interop.model_from_mujoco(mjm)
        mjd = mujoco.MjData(mjm)
        ncon = []

        def states(mjm=mjm, mjd=mjd, ncon=ncon):
            for state in _contact_states(mjm, mjd, 5, seed=7):
                ncon.append(int(state.ncon))
                yield state

        acc = _worst(mjm, m, _forward_fn(m), states())
        lines.append(f"{name} (ncon {min(ncon)}-{max(ncon)}): "
                     + ", ".join(f"{k} {v:.1e}" for k, v in acc.per_type().items()))
        assert not acc.bad(contact=True), (name, acc.bad(contact=True))
    ACCEPTANCE_FILE.write_text("\n".join(lines) + "\n")


LIMIT_XML = """
<mujoco>
  <option><flag contact="disable"/></option>
  <worldbody>
    <site name="w" pos="0 0 .5"/>
    <body>
      <joint name="h" type="hinge" range="-0.5 0.5" margin="0.1"/>
      <geom size=".1" pos=".2 0 0"/>
      <body pos=".3 0 0">
        <joint name="h2" type="hinge" axis="0 1 0" range="-1 1"/>
        <geom size=".1" pos=".2 0 0"/>
        <site name="t" pos=".3 0 0"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sp" limited="true" range="0 .6" margin=".05"><site site="w"/><site site="t"/>
    </spatial>
  </tendon>
  <sensor>
    <jointlimitpos joint="h"/><jointlimitvel joint="h"/><jointlimitfrc joint="h"/>
    <jointlimitpos joint="h2"/><jointlimitvel joint="h2"/><jointlimitfrc joint="h2"/>
    <tendonlimitpos tendon="sp"/><tendonlimitvel tendon="sp"/><tendonlimitfrc tendon="sp"/>
  </sensor>
</mujoco>
"""


def test_limit_sensors_from_constraint_rows():
    """Joint/tendon limit sensors read the limit rows of our own forward pass (0 without)."""
    import importlib

    import mjx_lite

    forward = importlib.import_module("mjx_lite.forward")
    mjm = mujoco.MjModel.from_xml_string(LIMIT_XML)
    mjd = mujoco.MjData(mjm)
    m = mjx_lite.load_model_from_string(LIMIT_XML)
    fn = jax.jit(lambda d: sensor.sensor_acc(
        m, sensor.sensor_vel(m, sensor.sensor_pos(m, forward.forward(m, d)))))
    for qpos in ([0.45, 0.95], [-0.3, 0.2], [0.55, -1.05], [0.0, 0.0]):
        mujoco.mj_resetData(mjm, mjd)
        mjd.qpos[:] = qpos
        mjd.qvel[:] = (0.3, -0.2)
        mujoco.mj_forward(mjm, mjd)
        d = mjx_lite.make_data(m).replace(qpos=jp.asarray(qpos), qvel=jp.asarray([0.3, -0.2]))
        ours = np.asarray(fn(d).sensordata)
        err = np.abs(ours - mjd.sensordata) / (1.0 + np.abs(mjd.sensordata))
        assert err.max() <= RTOL, (qpos, ours, mjd.sensordata)


# Energy: gravity, polynomial joint springs (hinge, slide, ball, free) and tendon springs
# with a deadband; contacts off so the forward pass stays small.
ENERGY_XML = """
<mujoco>
  <option gravity="0.3 -0.2 -9.81"><flag energy="enable" contact="disable"/></option>
  <worldbody>
    <site name="w" pos="0 0 1"/>
    <body name="a" pos="0 0 1">
      <joint name="h" type="hinge" axis="0 1 0" stiffness="3 .5 .8" springref="0.2"/>
      <geom size=".1" pos=".2 0 0" mass="1.3"/>
      <body pos=".3 0 0">
        <joint name="s" type="slide" axis="1 0 0" stiffness="2 .5 .8" armature=".1"/>
        <geom type="box" size=".1 .05 .02"/>
        <site name="t" pos=".1 0 0"/>
        <body pos=".2 0 0">
          <joint type="ball" stiffness="1.5 .5 .8"/><geom type="capsule" size=".03 .1"/>
        </body>
      </body>
    </body>
    <body pos="1 0 1"><geom size=".1"/><joint type="free" stiffness="0.7 .5 .8"/></body>
  </worldbody>
  <tendon>
    <spatial stiffness="4 .5 .8" springlength="0.3 0.5"><site site="w"/><site site="t"/></spatial>
    <fixed stiffness="2 .5 .8"><joint joint="h" coef="1"/><joint joint="s" coef="-2"/></fixed>
  </tendon>
  <sensor><e_potential/><e_kinetic/><clock/></sensor>
</mujoco>
"""


def _forward_fn(m):
    import importlib

    forward = importlib.import_module("mjx_lite.forward")
    return jax.jit(lambda d: forward.forward(m, d))


def test_energy_flag_matches_mujoco():
    """d.energy (potential in the position stage, kinetic in the velocity stage) and the
    energy sensors after mj_forward."""
    mjm = mujoco.MjModel.from_xml_string(ENERGY_XML)
    m = interop.model_from_mujoco(mjm)
    fn = _forward_fn(m)
    mjd = mujoco.MjData(mjm)
    for _ in _random_states(mjm, mjd, 3, seed=5):
        d = interop.data_from_mujoco(mjm, mjd, m)
        out = fn(d.replace(energy=jp.zeros(2), sensordata=jp.zeros_like(d.sensordata)))
        np.testing.assert_allclose(np.asarray(out.energy), mjd.energy, rtol=0,
                                   atol=ENERGY_ATOL)
        np.testing.assert_allclose(np.asarray(out.sensordata), mjd.sensordata, rtol=0,
                                   atol=ENERGY_ATOL)


@pytest.mark.parametrize("sensors", ["<e_potential/><e_kinetic/>", "<e_kinetic/>",
                                     "<e_potential/>"])
def test_energy_sensors_without_flag(sensors):
    """Without the flag MuJoCo 4.0 fills d.energy from an e_potential sensor only (and the
    kinetic entry when an e_kinetic sensor exists too); the sensors are right either way."""
    xml = ENERGY_XML.replace('energy="enable" ', "").replace(
        "<e_potential/><e_kinetic/><clock/>", sensors)
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = interop.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    next(_random_states(mjm, mjd, 1, seed=6))
    d = interop.data_from_mujoco(mjm, mjd, m)
    d = d.replace(energy=jp.zeros(2), sensordata=jp.zeros_like(d.sensordata))
    out = sensor.sensor_pos(m, d)
    np.testing.assert_allclose(np.asarray(out.energy), mjd.energy, rtol=0, atol=ENERGY_ATOL)
    np.testing.assert_allclose(np.asarray(out.sensordata), mjd.sensordata, rtol=0,
                               atol=ENERGY_ATOL)


def test_unsupported_raise_clearly():
    import mjx_lite

    cam = """<mujoco><worldbody><camera name="c" resolution="4 3"/><geom size=".1"/>
      </worldbody><sensor><rangefinder camera="c"/></sensor></mujoco>"""
    normal = cam.replace('<rangefinder camera="c"/>', '<rangefinder site="s" data="normal"/>')
    normal = normal.replace("<geom", '<site name="s"/><geom')
    m = mjx_lite.load_model_from_string(normal)
    with pytest.raises(NotImplementedError, match="normal"):
        sensor.sensor_pos(m, mjx_lite.make_data(m))
    hfield = """<mujoco><asset><hfield name="h" nrow="2" ncol="2" size="1 1 1 1"/></asset>
      <option><flag contact="disable"/></option><worldbody>
      <geom name="a" type="cylinder" size=".1 .1"/><geom name="b" type="hfield" hfield="h"/>
      </worldbody><sensor><distance geom1="a" geom2="b"/></sensor></mujoco>"""
    m = mjx_lite.load_model_from_string(hfield)
    with pytest.raises(NotImplementedError, match="hfield-cylinder"):
        sensor.sensor_pos(m, mjx_lite.make_data(m))
    with pytest.raises(mjx_lite.MJCFError, match="sensorsize"):
        mjx_lite.load_model_from_string(cam.replace('resolution="4 3"',
                                                    'resolution="4 3" sensorsize=".1 .1" '
                                                    'focal=".1 .1"'))
    with pytest.raises(mjx_lite.MJCFError, match="sensorsize"):
        mjx_lite.load_model_from_string(
            """<mujoco><worldbody><camera name="c" resolution="4 3" sensorsize=".1 .1"
            focal=".1 .1"/><site name="s"/></worldbody>
            <sensor><camprojection site="s" camera="c"/></sensor></mujoco>""")


# Touch, force, torque and acceleration sensors on contacts: a box resting on a plane (touch
# zones larger than its faces so no contact lies on a zone boundary), a ball, a capsule, a
# two-link arm pressing on the floor.
CONTACT_XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 .1"/>
    <site name="floor_zone" type="box" size="2 2 .05"/>
    <body name="box" pos="0 0 .11">
      <freejoint/>
      <geom name="box" type="box" size=".1 .1 .1" mass="1"/>
      <site name="box_bottom" type="box" size=".12 .12 .03" pos="0 0 -.1"/>
      <site name="box_center" pos="0 0 0" euler="10 20 30"/>
    </body>
    <body name="ball" pos=".02 .01 .35">
      <freejoint/>
      <geom name="ball" type="sphere" size=".08" mass=".5"/>
      <site name="ball_zone" type="sphere" size=".09"/>
    </body>
    <body name="arm" pos=".5 0 .3">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom name="upper" type="capsule" fromto="0 0 0 .3 0 0" size=".04"/>
      <site name="arm_base" pos=".05 0 0" euler="0 0 20"/>
      <body name="fore" pos=".3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-1.5 1.5"/>
        <geom name="fore" type="capsule" fromto="0 0 0 0 0 -.3" size=".04"/>
        <site name="tip" type="capsule" size=".05 .05" pos="0 0 -.3"/>
        <site name="elbow_site" pos="0 0 -.05" euler="30 0 0"/>
      </body>
    </body>
    <body name="cyl" pos="-.4 .3 .12" euler="90 0 0">
      <freejoint/>
      <geom name="cyl" type="capsule" size=".06 .1"/>
      <site name="cyl_zone" type="cylinder" size=".07 .12"/>
      <site name="cyl_ell" type="ellipsoid" size=".07 .07 .12"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="5"/><motor joint="elbow"/></actuator>
  <sensor>
    <touch site="floor_zone"/><touch site="box_bottom"/><touch site="ball_zone"/>
    <touch site="tip"/><touch site="cyl_zone"/><touch site="cyl_ell"/>
    <force site="box_center"/><torque site="box_center"/><force site="arm_base"/>
    <torque site="arm_base"/><force site="elbow_site"/><torque site="elbow_site"/>
    <force site="ball_zone"/><torque site="cyl_zone"/>
    <accelerometer site="box_center"/><framelinacc objtype="body" objname="fore"/>
    <jointlimitfrc joint="elbow"/>
    <distance geom1="ball" geom2="box" cutoff="1"/><normal body1="arm" body2="cyl" cutoff="2"/>
    <fromto geom1="fore" geom2="floor" cutoff="1"/><distance body1="box" geom2="upper" cutoff=".1"/>
    <rangefinder site="box_center"/>
    <e_potential/><e_kinetic/>
  </sensor>
</mujoco>
"""
# sensors whose values depend on the constraint solve
_CONTACT_TYPES = (SensorType.TOUCH, SensorType.FORCE, SensorType.TORQUE,
                  SensorType.ACCELEROMETER, SensorType.FRAMELINACC, SensorType.JOINTLIMITFRC)


def _contact_states(mjm, mjd, count, seed):
    """States after 200 MuJoCo steps from rest with random controls: objects in contact."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        mujoco.mj_resetData(mjm, mjd)
        mjd.ctrl[:] = rng.normal(size=mjm.nu)
        mjd.qvel[:] = 0.3 * rng.normal(size=mjm.nv)
        for _ in range(200):
            mujoco.mj_step(mjm, mjd)
        mujoco.mj_forward(mjm, mjd)
        assert mjd.ncon > 0
        yield mjd


# Contact sensors (XML reference, "sensor/contact"): tests/assets/contact_sensors.xml covers
# every matching criterion on either side (both normal directions), the site volume, every
# reduce mode, more slots than matches and a netforce sensor without matches.
CONTACT_SENSOR_XML = pathlib.Path(__file__).parent / "assets" / "contact_sensors.xml"
CONTACT_SENSOR_FILE = pathlib.Path(__file__).parent / "acceptance" / "contact_sensor.txt"

# a small CI-tier scene: a box (4 contacts) and a ball on the floor
SMALL_CONTACT_XML = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 .1"/>
    <site name="zone" type="box" size=".05 .2 .05" pos=".1 0 0"/>
    <body name="box" pos="0 0 .1"><freejoint/><geom name="box" type="box" size=".1 .1 .1"/>
    </body>
    <body name="ball" pos=".5 0 .08"><freejoint/><geom name="ball" size=".08"/></body>
  </worldbody>
  <sensor>
    <contact num="6" data="found force torque dist pos normal tangent"/>
    <contact body1="box" num="2" reduce="mindist" data="found dist normal tangent"/>
    <contact geom2="floor" num="3" reduce="maxforce" data="found force torque"/>
    <contact site="zone" num="3" data="found pos"/>
    <contact body1="box" body2="world" reduce="netforce" data="found force torque pos normal"/>
    <contact geom1="floor" geom2="ball" data="found linvel angvel"/>
    <contact geom1="ball" data="found pos linvel angvel"/>
    <contact body1="box" num="4" data="found linvel angvel"/>
  </sensor>
</mujoco>
"""


def _contact_sensor_worst(mjm, mjd, m, fn, worst):
    d = interop.data_from_mujoco(mjm, mjd, m)
    ours = np.asarray(fn(d.replace(sensordata=jp.zeros_like(d.sensordata))).sensordata)
    for i in range(mjm.nsensor):
        a, n = mjm.sensor_adr[i], mjm.sensor_dim[i]
        ref, o = mjd.sensordata[a:a + n], ours[a:a + n]
        # found counts exactly; the rest relative to the sensor's largest value
        size = [1, 3, 3, 1, 3, 3, 3, 3, 3]
        spec = mjm.sensor_intprm[i, 0]
        slot = sum(s for k, s in enumerate(size) if spec & (1 << k))
        if spec & 1:
            np.testing.assert_array_equal(o[::slot], ref[::slot], err_msg=mjm.sensor(i).name)
        err = np.abs(o - ref).max() / max(np.abs(ref).max(), 1e-300)
        worst[mjm.sensor(i).name] = max(worst.get(mjm.sensor(i).name, 0.0), err)


def test_contact_sensor_small():
    """Contact sensors after our full forward at MuJoCo's resting state."""
    mjm = mujoco.MjModel.from_xml_string(SMALL_CONTACT_XML)
    m = interop.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    mjd.qvel[6:8] = [0.8, 0.3]  # the ball rolls: linvel / angvel read a moving contact
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon == 5
    worst = {}
    _contact_sensor_worst(mjm, mjd, m, _forward_fn(m), worst)
    assert max(worst.values()) <= RTOL_CONTACT, worst


@pytest.mark.acceptance
def test_contact_sensor_acceptance():
    """Every contact-sensor option of tests/assets/contact_sensors.xml against MuJoCo 4.0
    (states after 200 steps with random controls), float64; found counts exact."""
    mjm = mujoco.MjModel.from_xml_path(str(CONTACT_SENSOR_XML))
    m = interop.model_from_mujoco(mjm)
    fn = _forward_fn(m)
    mjd = mujoco.MjData(mjm)
    worst, ncon = {}, []
    for _ in _contact_states(mjm, mjd, 4, seed=11):
        ncon.append(int(mjd.ncon))
        _contact_sensor_worst(mjm, mjd, m, fn, worst)
    CONTACT_SENSOR_FILE.write_text(
        "# contact sensors vs MuJoCo 4.0 (full forward at MuJoCo's state after 200 steps, "
        "float64): max|ours - ref| / max|ref| per sensor; found counts exact\n"
        f"ncon per state: {ncon}\n"
        + "\n".join(f"{k}: {v:.1e}" for k, v in worst.items()) + "\n")
    assert max(worst.values()) <= RTOL_CONTACT, worst


TRANSITION_FILE = pathlib.Path(__file__).parent / "acceptance" / "sensor_transition.txt"
# 27 sensors of every stage on the muscle/tendon arm (no contacts: smooth for differences);
# force and torque read cfrc_int, which holds the spatial tendons' forces on the arm. Not
# e_kinetic: MuJoCo's repeats a stale energy[1] inside mjd_transitionFD (see _random_states).
TRANSITION_SENSORS = """
<jointpos joint="shoulder"/><jointvel joint="elbow"/><tendonpos tendon="flexor"/>
<tendonvel tendon="triceps"/><actuatorpos actuator="biceps"/><actuatorvel actuator="triceps"/>
<actuatorfrc actuator="biceps"/><actuatorfrc actuator="flexor_muscle"/>
<jointactuatorfrc joint="elbow"/><tendonactuatorfrc tendon="triceps"/>
<framepos objtype="site" objname="lower_outer"/><framequat objtype="body" objname="lower"/>
<framexaxis objtype="geom" objname="hand" reftype="body" refname="upper"/>
<framelinvel objtype="site" objname="lower_inner"/><frameangvel objtype="body" objname="hand"/>
<framelinacc objtype="body" objname="hand"/><frameangacc objtype="body" objname="lower"/>
<accelerometer site="lower_outer"/><gyro site="upper_front"/><velocimeter site="lower_inner"/>
<magnetometer site="upper_back"/><subtreecom body="upper"/>
<subtreeangmom body="upper"/><subtreelinvel body="lower"/><e_potential/>
<force site="lower_outer"/><torque site="upper_front"/>
"""


@pytest.mark.acceptance
def test_transition_jacobians_sensors():
    """C and D of mjx_lite.transition_jacobians equal mujoco.mjd_transitionFD's (centered,
    eps 1e-6) on the tendon arm with 25 sensors, within 1e-4 relative, float64."""
    import mjx_lite

    root = etree.parse(str(pathlib.Path(__file__).parents[1] / "models" / "tendon_arm.xml"))
    block = root.getroot().find("sensor")
    for child in list(block):
        block.remove(child)
    for el in etree.fromstring(f"<sensor>{TRANSITION_SENSORS}</sensor>"):
        block.append(el)
    mjm = mujoco.MjModel.from_xml_string(etree.tostring(root).decode())
    assert mjm.nsensor >= 20
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = [0.4, 0.8]
    mjd.qvel[:] = [0.3, -0.2]
    mjd.act[:] = np.linspace(0.2, 0.6, mjm.na)
    mjd.ctrl[:] = [0.5, 0.3, 0.7, 0.4, -0.5, 0.2]
    mujoco.mj_forward(mjm, mjd)
    ns, nx = mjm.nsensordata, 2 * mjm.nv + mjm.na
    a, b = np.zeros((nx, nx)), np.zeros((nx, mjm.nu))
    c, d_ = np.zeros((ns, nx)), np.zeros((ns, mjm.nu))
    mujoco.mjd_transitionFD(mjm, mjd, 1e-6, True, a, b, c, d_)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    ours = jax.jit(lambda d: mjx_lite.transition_jacobians(m, d))(d)
    errs = {}
    for name, mine, ref in zip("ABCD", ours, (a, b, c, d_)):
        errs[name] = float(np.abs(np.asarray(mine) - ref).max() / np.abs(ref).max())
    TRANSITION_FILE.write_text(
        f"# transition_jacobians vs mjd_transitionFD (centered, eps 1e-6), tendon arm with "
        f"{mjm.nsensor} sensors ({ns} values), float64: max|ours - FD| / max|FD|\n"
        + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()) + "\n")
    assert errs["C"] <= 1e-4 and errs["D"] <= 1e-4, errs


CAMERA_RANGEFINDER_XML = """
<mujoco>
  <worldbody>
    <body name="scene"><geom type="box" size="1 1 .1" pos="0 0 -.1"/>
      <geom type="sphere" size=".3" pos=".3 .2 .3"/>
      <geom type="capsule" size=".1 .3" pos="-.5 0 .2"/>
    </body>
    <body pos=".1 -.2 2" euler="10 5 20">
      <camera name="persp" resolution="7 5" fovy="60"/><geom size=".05"/>
      <camera name="ortho" pos=".1 .1 .1" resolution="4 3" fovy="1.5" projection="orthographic"/>
    </body>
    <site name="s" pos="0 0 1" euler="180 0 0"/>
  </worldbody>
  <sensor>
    <rangefinder camera="persp" data="dist dir origin point depth"/>
    <rangefinder camera="ortho" data="dist dir origin point depth"/>
    <rangefinder site="s" data="dist point depth"/><rangefinder camera="persp"/>
  </sensor>
</mujoco>
"""


def test_camera_rangefinder():
    """Camera rangefinders (depth images, perspective and orthographic, rays that miss
    included) and site data fields equal MuJoCo's (XML reference, "sensor/rangefinder")."""
    import mjx_lite

    mjm = mujoco.MjModel.from_xml_string(CAMERA_RANGEFINDER_XML)
    m = mjx_lite.load_model_from_string(CAMERA_RANGEFINDER_XML)
    for f in ("sensor_dim", "sensor_adr", "sensor_intprm", "sensor_objtype", "sensor_objid"):
        np.testing.assert_array_equal(np.asarray(getattr(m, f)),
                                      getattr(mjm, f)[..., :np.asarray(getattr(m, f)).shape[-1]]
                                      if f == "sensor_intprm" else getattr(mjm, f))
    m = interop.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    fn = jax.jit(lambda d: sensor.sensor_pos(m, d))
    for _ in _random_states(mjm, mjd, 2, seed=4):
        d = interop.data_from_mujoco(mjm, mjd, m)
        ours = np.asarray(fn(d.replace(sensordata=jp.zeros_like(d.sensordata))).sensordata)
        assert np.any(mjd.sensordata[:mjm.sensor_dim[0]:11] < 0)  # some rays miss
        np.testing.assert_allclose(ours, mjd.sensordata, rtol=0, atol=1e-12)
