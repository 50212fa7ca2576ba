"""Parity of sensor.py (position, velocity and actuator-force sensors, every frame-sensor
object and reference type, cutoff, the sensor disable bit) with MuJoCo 4.0 C."""

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
ACCEPTANCE_FILE = pathlib.Path(__file__).parent / "acceptance" / "sensor.txt"

# Sensor elements sensor.py computes; others (contact/force/ray/geom-distance) are removed
# from the wheel's models before comparing.
SUPPORTED = {
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
      <geom type="sphere" size=".1"/>
      <site name="t1"/>
    </body>
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


def _errors(mjm, mjd, m, fn) -> np.ndarray:
    """Per-sensor relative error |ours - mujoco| / (1 + |mujoco|) at MuJoCo's state."""
    d = interop.data_from_mujoco(mjm, mjd, m)
    ours = np.asarray(fn(d.replace(sensordata=jp.zeros_like(d.sensordata))).sensordata)
    err = np.abs(ours - mjd.sensordata) / (1.0 + np.abs(mjd.sensordata))
    return np.array([err[a:a + n].max() for a, n in zip(mjm.sensor_adr, mjm.sensor_dim)])


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
        mujoco.mj_forward(mjm, mjd)
        yield


def _report(mjm, worst, rtol):
    bad = np.nonzero(~(worst <= rtol))[0]
    return [f"{i}: {SensorType(mjm.sensor_type[i]).name} objtype {mjm.sensor_objtype[i]} "
            f"reftype {mjm.sensor_reftype[i]} error {worst[i]:.2e}" for i in bad]


@pytest.fixture(scope="module")
def inline():
    mjm = mujoco.MjModel.from_xml_string(INLINE_XML)
    m = interop.model_from_mujoco(mjm)
    return mjm, m, _pipeline(m)


def test_inline_every_type_and_reftype(inline):
    mjm, m, fn = inline
    mjd = mujoco.MjData(mjm)
    worst = np.zeros(mjm.nsensor)
    for _ in _random_states(mjm, mjd, 4, seed=0):
        worst = np.maximum(worst, _errors(mjm, mjd, m, fn))
    assert not _report(mjm, worst, RTOL), _report(mjm, worst, RTOL)


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
    worst = np.zeros(mjm.nsensor)
    for _ in _random_states(mjm, mjd, 3, seed=2):
        worst = np.maximum(worst, _errors(mjm, mjd, m, fn))
    assert not _report(mjm, worst, RTOL), _report(mjm, worst, RTOL)


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

    g = jax.grad(framepos)(d0.xpos)
    assert np.all(np.isfinite(np.asarray(g)))
    batch = jax.vmap(lambda t: fn(d0.replace(time=t)).sensordata)(jp.arange(3.0))
    clock = mjm.sensor_adr[np.nonzero(mjm.sensor_type == SensorType.CLOCK)[0][0]]
    np.testing.assert_array_equal(np.asarray(batch[:, clock]), [0.0, 1.0, 2.0])


@pytest.mark.acceptance
def test_sensor_acceptance():
    """Wheel sensor models (supported sensors) and the inline model after 200 MuJoCo steps."""
    lines = ["# sensor.py vs MuJoCo 4.0: worst relative error |d| / (1 + |ref|) per sensor type",
             "# (states after 200 mj_step from random qpos/qvel/ctrl, float64)"]
    models = [(p.name, mujoco.MjModel.from_xml_string(_strip(p)))
              for p in sorted((MJX_TEST_DATA / "sensor").glob("*.xml"))]
    models.append(("inline_every_type", mujoco.MjModel.from_xml_string(INLINE_XML)))
    for name, mjm in models:
        m = interop.model_from_mujoco(mjm)
        fn = _pipeline(m)
        mjd = mujoco.MjData(mjm)
        worst = np.zeros(mjm.nsensor)
        for _ in _random_states(mjm, mjd, 5, seed=4, steps=200):
            worst = np.maximum(worst, _errors(mjm, mjd, m, fn))
        per_type = {}
        for i, t in enumerate(mjm.sensor_type):
            key = SensorType(t).name
            per_type[key] = max(per_type.get(key, 0.0), float(worst[i]))
        lines.append(f"{name}: " + ", ".join(f"{k} {v:.1e}" for k, v in sorted(per_type.items())))
        assert not _report(mjm, worst, RTOL), (name, _report(mjm, worst, RTOL))
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
