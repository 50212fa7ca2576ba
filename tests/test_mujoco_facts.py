"""MuJoCo 4.0.0 facts that mjx_lite relies on, checked against the installed oracle.

The seed documents describe MuJoCo 3.x. Every place where 4.0 behaves differently, and mjx_lite
follows 4.0, has a test here; docs/mujoco_deltas.md maps each one to the seed line it overrides.
If the oracle is upgraded, these tests say which assumptions broke.
"""

from __future__ import annotations

import enum
import re

import mujoco
import numpy as np
import pytest

from mjx_lite import types

from conftest import REPO_ROOT

# mjx_lite enum -> (MuJoCo enum, name prefix to strip, MuJoCo members deliberately not mirrored).
# Excluded members are never stored in an mjModel field that mjx_lite carries: mjN* are counts,
# geom types >= 100 are decoration types of the renderer, FRAME/DEFAULT/MODEL are mjSpec kinds.
ENUMS = {
    "DisableBit": ("mjtDisableBit", "mjDSBL_", {"mjNDISABLE"}),
    "EnableBit": ("mjtEnableBit", "mjENBL_", {"mjNENABLE"}),
    "IntegratorType": ("mjtIntegrator", "mjINT_", set()),
    "ConeType": ("mjtCone", "mjCONE_", set()),
    "SolverType": ("mjtSolver", "mjSOL_", set()),
    "JacobianType": ("mjtJacobian", "mjJAC_", set()),
    "JointType": ("mjtJoint", "mjJNT_", set()),
    "GeomType": ("mjtGeom", "mjGEOM_", {
        "mjNGEOMTYPES", "mjGEOM_ARROW", "mjGEOM_ARROW1", "mjGEOM_ARROW2", "mjGEOM_LINE",
        "mjGEOM_LINEBOX", "mjGEOM_FLEX", "mjGEOM_SKIN", "mjGEOM_LABEL", "mjGEOM_TRIANGLE",
        "mjGEOM_NONE"}),
    "TrnType": ("mjtTrn", "mjTRN_", set()),
    "DynType": ("mjtDyn", "mjDYN_", set()),
    "GainType": ("mjtGain", "mjGAIN_", set()),
    "BiasType": ("mjtBias", "mjBIAS_", set()),
    "EqType": ("mjtEq", "mjEQ_", set()),
    "WrapType": ("mjtWrap", "mjWRAP_", set()),
    "SensorType": ("mjtSensor", "mjSENS_", set()),
    "ObjType": ("mjtObj", "mjOBJ_", {"mjNOBJECT", "mjOBJ_FRAME", "mjOBJ_DEFAULT", "mjOBJ_MODEL"}),
    "Stage": ("mjtStage", "mjSTAGE_", set()),
    "DataType": ("mjtDataType", "mjDATATYPE_", set()),
    "CamLightType": ("mjtCamLight", "mjCAMLIGHT_", set()),
    "SameFrame": ("mjtSameFrame", "mjSAMEFRAME_", set()),
}


def _forward(xml: str) -> tuple[mujoco.MjModel, mujoco.MjData]:
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    return m, d


def test_version():
    assert mujoco.__version__ == "4.0.0"


@pytest.mark.parametrize("ours", sorted(ENUMS))
def test_enum_matches_mujoco(ours):
    theirs, prefix, excluded = ENUMS[ours]
    members = getattr(mujoco, theirs).__members__
    expected = {k.removeprefix(prefix): int(v) for k, v in members.items() if k not in excluded}
    got = {e.name: int(e.value) for e in getattr(types, ours)}
    assert got == expected
    # Exclusions must name real members, or a rename in MuJoCo would go unnoticed.
    assert excluded <= set(members)


def test_every_mjx_lite_enum_is_checked():
    enums = {n for n, v in vars(types).items()
             if isinstance(v, type) and issubclass(v, enum.Enum) and v.__module__ == types.__name__}
    assert enums == set(ENUMS)



def test_new_members_named_in_the_checklist():
    """The 4.0 additions SPEC-CHECKLIST's first paragraph names, with their values."""
    assert mujoco.mjtIntegrator.mjINT_DISCRETE == types.IntegratorType.DISCRETE == 4
    assert mujoco.mjtDyn.mjDYN_DCMOTOR == types.DynType.DCMOTOR == 5
    assert mujoco.mjtDyn.mjDYN_PID == types.DynType.PID == 6
    assert mujoco.mjtGain.mjGAIN_SO3 == types.GainType.SO3 == 4
    assert mujoco.mjtTrn.mjTRN_SO3 == types.TrnType.SO3 == 6
    assert mujoco.mjtSensor.mjSENS_GEOMDIST == types.SensorType.GEOMDIST == 39
    assert mujoco.mjtSensor.mjSENS_TACTILE == types.SensorType.TACTILE == 46

# Defaults of mjOption in 4.0 (an empty model). ccd_iterations is 35; the 3.x seed says 50.
OPTION_DEFAULTS = {
    "timestep": 0.002, "impratio": 1.0, "tolerance": 1e-8, "ls_tolerance": 0.01,
    "noslip_tolerance": 1e-6, "ccd_tolerance": 1e-6, "sleep_tolerance": 1e-3,
    "gravity": [0, 0, -9.81], "wind": [0, 0, 0], "magnetic": [0, -0.5, 0], "density": 0.0,
    "viscosity": 0.0, "o_margin": 0.0, "o_solref": [0.02, 1],
    "o_solimp": [0.9, 0.95, 0.001, 0.5, 2], "o_friction": [1, 1, 0.005, 1e-4, 1e-4],
    "integrator": types.IntegratorType.EULER, "cone": types.ConeType.PYRAMIDAL,
    "jacobian": types.JacobianType.AUTO, "solver": types.SolverType.NEWTON,
    "iterations": 100, "ls_iterations": 50, "noslip_iterations": 0, "ccd_iterations": 35,
    "disableflags": 0, "enableflags": 0, "disableactuator": 0,
    "sdf_initpoints": 40, "sdf_iterations": 10,
}


def test_option_defaults():
    opt = mujoco.MjModel.from_xml_string("<mujoco/>").opt
    for name, value in OPTION_DEFAULTS.items():
        np.testing.assert_array_equal(getattr(opt, name), value, err_msg=name)


def test_option_fields_exist_in_mjoption():
    # Our Option mirrors mjOption; every field we carry must exist there under the same name.
    fields = types.Option.__dataclass_fields__
    assert [f for f in fields if not hasattr(mujoco.MjOption(), f)] == []
    assert set(OPTION_DEFAULTS) == set(types.Option.__dataclass_fields__)


@pytest.mark.parametrize("flag,bit", [
    ("spring", types.DisableBit.SPRING), ("damper", types.DisableBit.DAMPER),
    ("gravity", types.DisableBit.GRAVITY), ("nativeccd", types.DisableBit.NATIVECCD),
    ("island", types.DisableBit.ISLAND), ("multiccd", types.DisableBit.MULTICCD),
])
def test_disable_flag_bits(flag, bit):
    """multiccd, nativeccd and island are disable bits in 4.0, hence on by default."""
    xml = f'<mujoco><option><flag {flag}="disable"/></option></mujoco>'
    opt = mujoco.MjModel.from_xml_string(xml).opt
    assert (opt.disableflags, opt.enableflags) == (int(bit), 0)


def test_passive_flag_is_gone():
    with pytest.raises(ValueError, match="passive"):
        mujoco.MjModel.from_xml_string(
            '<mujoco><option><flag passive="disable"/></option></mujoco>')


def test_enable_flag_bits():
    xml = '<mujoco><option><flag energy="enable" sleep="enable"/></option></mujoco>'
    opt = mujoco.MjModel.from_xml_string(xml).opt
    expected = types.EnableBit.ENERGY | types.EnableBit.SLEEP
    assert (opt.disableflags, opt.enableflags) == (0, expected)


_PAIR_XML = """
<mujoco><option>{option}</option>
  <asset><mesh name="cube" scale="{mesh_scale}"
    vertex="-1 -1 -1  1 -1 -1  1 1 -1  -1 1 -1  -1 -1 1  1 -1 1  1 1 1  -1 1 1"/></asset>
  <worldbody>
    <geom type="{type1}" size="{size1}" mesh="{mesh1}"/>
    <body pos="0 0 {z}" euler="0 0 {yaw}"><freejoint/>
      <geom type="{type2}" size="{size2}" mesh="{mesh2}"/></body>
  </worldbody></mujoco>"""


def _pair(type1, size1, type2, size2, z, yaw=0.0, option=""):
    mesh1 = "cube" if type1 == "mesh" else ""
    mesh2 = "cube" if type2 == "mesh" else ""
    xml = _PAIR_XML.format(option=option, type1=type1, size1=size1 if not mesh1 else "",
                           type2=type2, size2=size2 if not mesh2 else "", mesh1=mesh1,
                           mesh2=mesh2, z=z, yaw=yaw, mesh_scale="0.2 0.2 0.1")
    xml = xml.replace(' size=""', "").replace(' mesh=""', "")
    return _forward(xml)[1]


NO_MULTICCD = '<flag multiccd="disable"/>'


@pytest.mark.parametrize("case,expected", [
    # A small face resting on a larger one: 4 contacts, one per corner or rim point.
    (("box", ".5 .5 .1", "box", ".2 .2 .1", 0.199), 4),
    (("cylinder", ".5 .1", "box", ".2 .2 .1", 0.199), 4),
    (("box", ".5 .5 .1", "cylinder", ".2 .1", 0.199), 4),
    (("cylinder", ".5 .1", "cylinder", ".2 .1", 0.199), 4),
    (("mesh", "", "mesh", "", 0.199), 4),
    # Same-size squares rotated 45 degrees: the analytic box-box collider gives 8.
    (("box", ".3 .3 .1", "box", ".3 .3 .1", 0.199, 45.0), 8),
])
def test_face_to_face_contact_count(case, expected):
    """General convex pairs give up to 4 contacts by default in 4.0 (multiccd on)."""
    assert _pair(*case).ncon == expected


@pytest.mark.parametrize("case,expected", [
    (("cylinder", ".5 .1", "box", ".2 .2 .1", 0.199), 1),
    (("mesh", "", "mesh", "", 0.199), 1),
    (("box", ".5 .5 .1", "box", ".2 .2 .1", 0.199), 4),  # box-box is analytic, unaffected
])
def test_contact_count_without_multiccd(case, expected):
    assert _pair(*case, option=NO_MULTICCD).ncon == expected


def test_contact_count_libccd():
    # With the 3.x libccd path (nativeccd disabled), the same cylinder-box pair gives 5.
    d = _pair("cylinder", ".5 .1", "box", ".2 .2 .1", 0.199, option='<flag nativeccd="disable"/>')
    assert d.ncon == 5


_MARGIN_XML = """
<mujoco><worldbody>
  <geom type="box" size=".3 .3 .1" margin="{m1}" gap="{g1}"/>
  <body pos="0 0 {z}"><freejoint/><geom type="sphere" size=".1" margin="{m2}" gap="{g2}"/></body>
</worldbody></mujoco>"""


@pytest.mark.parametrize("m1,m2,g1,g2,dist,detected,active", [
    (0.1, 0.2, 0.0, 0.0, 0.05, True, True),
    (0.1, 0.1, 0.1, 0.1, 0.05, True, True),    # 3.x: margin - gap = 0 would make it inactive
    (0.05, 0.05, 0.0, 0.0, 0.09, True, True),  # 3.x: max(margin) = 0.05 would not detect it
    (0.05, 0.05, 0.0, 0.0, 0.11, False, False),
    (0.0, 0.0, 0.1, 0.1, 0.15, True, False),   # detected within sum(margin) + sum(gap)
    (0.02, 0.03, 0.04, 0.05, 0.13, True, False),
    (0.02, 0.03, 0.04, 0.05, 0.15, False, False),
])
def test_margin_and_gap(m1, m2, g1, g2, dist, detected, active):
    """4.0: includemargin = margin1 + margin2 (gap not subtracted); a contact is detected while
    dist < includemargin + gap1 + gap2 and is active (not excluded) while dist < includemargin."""
    xml = _MARGIN_XML.format(m1=m1, m2=m2, g1=g1, g2=g2, z=0.2 + dist)
    _, d = _forward(xml)
    assert d.ncon == int(detected)
    if detected:
        np.testing.assert_allclose(d.contact.dist, [dist], atol=1e-12)
        np.testing.assert_allclose(d.contact.includemargin, [m1 + m2], atol=1e-15)
        assert d.contact.exclude[0] == int(not active)
        assert (d.nefc > 0) == active


def test_pair_includemargin_is_pair_margin():
    xml = """<mujoco><worldbody><geom name="a" type="box" size=".3 .3 .1"/>
      <body pos="0 0 .25"><freejoint/><geom name="b" type="sphere" size=".1"/></body></worldbody>
      <contact><pair geom1="a" geom2="b" margin="0.1" gap="0.03"/></contact></mujoco>"""
    _, d = _forward(xml)
    assert d.ncon == 1
    np.testing.assert_allclose(d.contact.includemargin, [0.1], atol=1e-15)


def test_solver_parameter_defaults():
    """The [ext] defaults of the checklist (solref, solimp, friction), as 4.0 compiles them."""
    xml = """<mujoco><worldbody><body><joint type="hinge" limited="true" range="-1 1"/>
      <geom type="sphere" size=".1"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    solref, solimp = [0.02, 1.0], [0.9, 0.95, 0.001, 0.5, 2.0]
    for field in ("geom_solref", "jnt_solref", "dof_solref"):
        np.testing.assert_array_equal(getattr(m, field)[0], solref, err_msg=field)
    for field in ("geom_solimp", "jnt_solimp", "dof_solimp"):
        np.testing.assert_array_equal(getattr(m, field)[0], solimp, err_msg=field)
    np.testing.assert_array_equal(m.geom_friction[0], [1, 0.005, 1e-4])
    assert (m.geom_condim[0], m.geom_solmix[0], m.geom_priority[0]) == (3, 1.0, 0)


_CHAIN_XML = """<mujoco><worldbody>
  <body><joint name="h" type="hinge"/><geom type="capsule" size=".05" fromto="0 0 0 0 0 -.5"/>
    <body pos="0 0 -.5"><joint name="s" type="slide" axis="1 0 0"/>
      <geom type="box" size=".1 .1 .1"/></body></body></worldbody>
  <tendon><fixed name="t"><joint joint="h" coef="2"/><joint joint="s" coef="1"/></fixed></tendon>
  <actuator><motor joint="h" gear="3"/><motor tendon="t"/></actuator></mujoco>"""


def test_mass_matrix_is_M_and_fullM_takes_data():
    m, d = _forward(_CHAIN_XML)
    assert hasattr(d, "M") and not hasattr(d, "qM")
    assert d.M.shape == (m.nM,)
    dense = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, dense)
    np.testing.assert_allclose(dense, dense.T)
    assert np.all(np.linalg.eigvalsh(dense) > 0)
    with pytest.raises(TypeError):
        mujoco.mj_fullM(m, dense, d.M)  # the 3.x signature (m, dst, qM) is gone


def test_moment_and_tendon_jacobian_are_sparse():
    """interop expands these to dense: d.actuator_moment is CSR over (nu, nv) with
    moment_rownnz/rowadr/colind on MjData, ten_J is CSR with its structure on MjModel."""
    m, d = _forward(_CHAIN_XML)
    nnz = int(d.moment_rownnz.sum())
    assert d.actuator_moment.shape[0] >= nnz == 3  # motor on h: 1 dof; tendon: 2 dofs
    rows = [d.actuator_moment[a:a + n]
            for a, n in zip(d.moment_rowadr, d.moment_rownnz, strict=True)]
    np.testing.assert_allclose(rows[0], [3.0])
    np.testing.assert_allclose(rows[1], [2.0, 1.0])
    assert m.ten_J_rownnz.tolist() == [2]
    np.testing.assert_allclose(d.ten_J[m.ten_J_rowadr[0]:][:2], [2.0, 1.0])


_DELTAS = REPO_ROOT / "docs" / "mujoco_deltas.md"
_SEED_FILES = {"000": "000_14f7d172c1a5ccbe.txt", "002": "002_9d41ec8fc3092b8e.txt"}


def _delta_rows() -> list[list[str]]:
    rows = []
    for line in _DELTAS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 6 and cells[0].isdigit():
            rows.append(cells)
    return rows


def test_deltas_table_names_real_tests():
    rows = _delta_rows()
    assert len(rows) >= 15
    here = globals()
    for row in rows:
        for name in re.findall(r"`(test_\w+)", row[5]):
            assert callable(here.get(name)), f"row {row[0]}: no test named {name}"


@pytest.mark.seeds
def test_deltas_table_cites_the_seeds(seeds_dir):
    for number, _, ref, quote, _, _ in _delta_rows():
        file, line = ref.split(":")
        text = (seeds_dir / _SEED_FILES[file]).read_text().splitlines()[int(line) - 1]
        assert quote.strip("`") in text, f"row {number}: {ref} does not contain {quote}"
