"""The compiler's element passes (contact, equality, tendon, actuator, sensor, keyframe, custom)
against the mjModel that MuJoCo 4.0 compiles from the same inline XML.

Two routes: the element passes alone, run on a kinematic tree copied from MuJoCo (so a
difference is the pass's own), and the whole compiler through ``load_model_from_string``.
Fields that need the dynamics at qpos0 are listed by each pass under ``_pending`` (filled by
``set_const``); the tests assert that list exactly, and compare every other field.
"""

from __future__ import annotations

import itertools
import re

import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.compiler import actuators, contact, equality, keyframe, sensors, tendon
from mjx_lite.compiler.context import Context
from mjx_lite.compiler.parse import parse
from mjx_lite.errors import MJCFError

from parity import assert_close

RTOL = 1e-10
_TREE_PREFIXES = ("body_", "jnt_", "dof_", "geom_", "site_", "cam_", "mesh_")
_OBJ = {"body": mujoco.mjtObj.mjOBJ_BODY, "jnt": mujoco.mjtObj.mjOBJ_JOINT,
        "geom": mujoco.mjtObj.mjOBJ_GEOM, "site": mujoco.mjtObj.mjOBJ_SITE,
        "cam": mujoco.mjtObj.mjOBJ_CAMERA, "mesh": mujoco.mjtObj.mjOBJ_MESH,
        "light": mujoco.mjtObj.mjOBJ_LIGHT, "mat": mujoco.mjtObj.mjOBJ_MATERIAL}
_PASSES = (contact.build_contact, tendon.build_tendons, equality.build_equality,
           actuators.build_actuators, sensors.build_sensors, keyframe.build_keyframes,
           keyframe.build_custom)
_NOT_MJMODEL = {"numeric_data", "text_data"}


def _tree_context(xml: str) -> tuple[mujoco.MjModel, Context]:
    """MuJoCo's compiled model, and a Context holding its kinematic tree (the tree pass's
    output), so that only the element passes are under test."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    spec = parse(xml)
    ctx = Context(spec=spec)
    ctx.autolimits = spec.compiler("autolimits", "true") == "true"
    ctx.angle_scale = np.pi / 180 if spec.compiler("angle", "degree") == "degree" else 1.0
    for name in dir(mjm):
        if name.startswith(_TREE_PREFIXES) and "actuator" not in name:
            ctx.fields[name] = np.array(getattr(mjm, name))
    for name in ("nq", "nv", "njnt", "nbody", "ngeom", "nsite", "ncam", "nmocap"):
        ctx.fields[name] = int(getattr(mjm, name))
    ctx.fields["qpos0"] = mjm.qpos0.copy()
    ctx.fields["qpos_spring"] = mjm.qpos_spring.copy()
    d = mujoco.MjData(mjm)
    mujoco.mj_kinematics(mjm, d)
    ctx.fields["body_xpos0"] = d.xpos.copy()
    ctx.fields["body_xquat0"] = d.xquat.copy()
    for kind, obj in _OBJ.items():
        count = {"jnt": mjm.njnt, "cam": mjm.ncam, "mat": mjm.nmat}.get(kind)
        count = getattr(mjm, "n" + kind) if count is None else count
        for i in range(count):
            name = mujoco.mj_id2name(mjm, obj, i) or ""
            ctx.names.setdefault(kind, []).append(name)
            ctx.elements.setdefault(kind, []).append(None)
            if name:
                ctx.ids.setdefault(kind, {})[name] = i
    return mjm, ctx


def _run_passes(xml: str) -> tuple[mujoco.MjModel, dict, list[str], Context]:
    mjm, ctx = _tree_context(xml)
    fields, pending = {}, []
    for step in _PASSES:
        out = step(ctx)
        pending.extend(out.pop("_pending", []))
        fields.update(out)
    return mjm, fields, sorted(pending), ctx


def _compare(fields: dict, mjm, skip=()) -> int:
    """Compares every mjModel-named field (relative RTOL, worst index on failure)."""
    count = 0
    for name, ours in fields.items():
        if name in skip or name in _NOT_MJMODEL or not hasattr(mjm, name):
            continue
        theirs = getattr(mjm, name)
        if isinstance(theirs, np.ndarray):
            assert np.shape(ours) == theirs.shape, f"{name}: {np.shape(ours)} vs {theirs.shape}"
            assert_close(name, np.asarray(ours, dtype=float), theirs.astype(float), RTOL)
        else:
            assert ours == theirs, f"{name}: ours {ours} vs mujoco {theirs}"
        count += 1
    return count


def _names(ctx: Context, mjm, kind: str, obj) -> None:
    count = {"eq": mjm.neq, "actuator": mjm.nu}.get(kind, None)
    count = getattr(mjm, "n" + kind) if count is None else count
    theirs = [mujoco.mj_id2name(mjm, obj, i) or "" for i in range(count)]
    assert ctx.names.get(kind, []) == theirs, kind


# -- models ---------------------------------------------------------------------------------
_TREE = """
<worldbody>
  <body name="a" pos="0 0 1" euler="10 20 30">
    <freejoint name="free"/>
    <geom name="ga" size=".1"/>
    <site name="sa" pos=".1 .2 .3" euler="5 0 0" size=".05"/>
    <camera name="cam" resolution="4 3"/>
    <body name="b" pos=".5 0 0" euler="0 0 40">
      <joint name="hinge" axis="0 1 0" range="-30 60" ref="15" springref="20"/>
      <joint name="ball" type="ball"/>
      <geom name="gb" size=".1"/>
      <geom name="cyl" type="cylinder" size=".05 .2" pos="0 .3 0"/>
      <site name="sb" pos="0 .1 0"/>
      <site name="side" pos=".2 0 0"/>
    </body>
  </body>
  <body name="c" pos="1 2 0">
    <joint name="slide" type="slide" range="-1 2"/>
    <joint name="hinge2"/>
    <geom name="gc" size=".1"/>
    <site name="sc" pos=".3 0 0"/>
    <site name="sc2" pos="0 0 .4"/>
  </body>
  <body name="mocap" mocap="true" pos="1 2 3" euler="0 0 30"/>
</worldbody>
"""

TENDON_XML = f"""<mujoco><size nuser_tendon="-1"/>{_TREE}
<tendon>
  <fixed name="f1" damping="1 2 3" stiffness="2 3 4" springlength=".5" limited="true" range="-1 1"
         user="1 2 3"><joint joint="hinge" coef="2"/><joint joint="hinge2" coef="-1"/></fixed>
  <fixed name="f2" springlength=".1 .5" frictionloss=".3" armature=".2" margin=".1"
         solreflimit=".01 2" solimpfriction=".8 .9 .01 .4 3" actuatorfrcrange="-1 2">
    <joint joint="slide" coef="3"/></fixed>
  <fixed name="f3"><joint joint="hinge" coef="1.5"/></fixed>
  <spatial name="s1" width=".01" rgba="1 0 0 1" range="0 3" group="2">
    <site site="sa"/><site site="sb"/><site site="sc"/></spatial>
  <spatial name="s2"><site site="sa"/><geom geom="gb" sidesite="side"/><site site="sb"/>
    <pulley divisor="2"/><site site="sb"/><geom geom="cyl"/><site site="sc"/></spatial>
  <spatial name="s3" springlength="2"><site site="sc"/><site site="sc2"/></spatial>
  <spatial name="s4"><site site="sc"/><site site="sc2"/></spatial>
</tendon></mujoco>"""

EQUALITY_XML = f"""<mujoco>{_TREE}
<tendon><fixed name="t1"><joint joint="hinge" coef="1"/></fixed>
  <fixed name="t2"><joint joint="slide" coef="1"/></fixed></tendon>
<default><equality solref=".03 1.5"/><default class="e"><equality solimp=".7 .8 .02 .4 3"/>
  </default></default>
<equality>
  <connect body1="a" body2="b" anchor=".1 .2 .3"/>
  <connect name="c2" body1="b" anchor=".1 .2 .3" solref=".01 2" active="false" class="e"/>
  <connect site1="sa" site2="sc"/>
  <weld body1="a" body2="c" anchor=".1 0 0"/>
  <weld body1="a" body2="c" relpose="1 2 3 1 1 0 0" torquescale="2"/>
  <weld body1="b"/>
  <weld site1="sb" site2="sc"/>
  <weld site1="sb" site2="sa" torquescale="3"/>
  <joint joint1="hinge" joint2="hinge2" polycoef=".1 2 3 4 5"/>
  <joint joint1="slide"/>
  <tendon tendon1="t1" tendon2="t2" polycoef="0 1"/>
  <tendon tendon1="t2"/>
</equality></mujoco>"""

CONTACT_XML = f"""<mujoco>{_TREE}
<default><pair condim="4"/><default class="p">
  <pair friction=".3 .3 .01 .02 .03" margin=".2"/></default></default>
<contact>
  <pair name="p0" geom1="gb" geom2="cyl"/>
  <pair name="p1" geom1="gc" geom2="ga" condim="3" friction="1 2 3 4 5" solref=".1 .2"
        solreffriction=".3 .4"
        solimp=".1 .2 .3 .4 5" margin="1" gap=".5"/>
  <pair geom1="ga" geom2="gc" class="p" friction=".7"/>
  <pair geom1="gb" geom2="gc" solref="-100 -2" condim="6"/>
  <exclude name="e0" body1="c" body2="a"/>
  <exclude body1="world" body2="c"/>
  <exclude body1="b" body2="b"/>
</contact></mujoco>"""

ACTUATOR_XML = f"""<mujoco><compiler autolimits="true"/><size nuser_actuator="-1"/>{_TREE}
<tendon><fixed name="t" range="-1 1"><joint joint="hinge" coef="2"/></fixed></tendon>
<default>
  <default class="pd"><position kp="10" kv="2" timeconst=".3"/>
    <default class="pd2"><general ctrlrange="-1 1" gear="2"/></default></default>
  <default class="vel"><velocity kv="3"/><general forcerange="-5 5"/></default>
  <default class="mus"><muscle force="50" timeconst=".02 .05"/></default>
  <default class="mixed"><position kp="7"/><motor/></default>
</default>
<actuator>
  <motor name="m1" joint="hinge" gear="3" ctrlrange="-1 1" forcerange="-2 2" group="2"
         user="1 2"/>
  <motor joint="free" gear="1 2 3 .1 .2 .3"/>
  <motor jointinparent="ball" gear="0 0 1"/>
  <position joint="hinge" kp="5" kv="1" inheritrange=".5"/>
  <position class="pd" joint="slide"/>
  <position class="pd2" tendon="t" dampratio="1"/>
  <position joint="hinge2" timeconst="0"/>
  <velocity class="vel" joint="hinge2"/>
  <velocity joint="slide" kv="4" damping="1.5" armature=".2"/>
  <intvelocity joint="slide" kp="3" kv=".5" actrange="-1 1"/>
  <intvelocity joint="hinge" inheritrange="1"/>
  <damper joint="hinge2" kv="2" ctrlrange="0 3"/>
  <cylinder joint="slide" diameter="2" bias="1 2 3" timeconst=".5"/>
  <cylinder class="pd" joint="slide" area="3"/>
  <muscle tendon="t" lengthrange="0 1"/>
  <muscle class="mus" joint="slide" lengthrange=".5 1.5" range=".6 1.2"/>
  <adhesion body="c" gain="5" ctrlrange="0 1"/>
  <general site="sa" refsite="sc" gear="0 1 0 0 0 0"/>
  <general site="sb" dyntype="filter" dynprm=".1" gaintype="affine" gainprm="1 2 3"
           biastype="affine" biasprm="0 -1 -2" actearly="true"/>
  <general cranksite="sc" slidersite="sc2" cranklength=".5"/>
  <general joint="hinge" dyntype="user" actdim="3" gaintype="user" biastype="user"/>
  <general joint="hinge" dyntype="integrator" actlimited="false" actrange="-1 1"
           input="vel"/>
  <general class="mixed" joint="hinge2"/>
  <position class="mixed" joint="hinge2"/>
  <general joint="slide" damping="1 2 3" armature=".3"/>
</actuator></mujoco>"""

SENSOR_XML = f"""<mujoco><size nuser_sensor="3"/>{_TREE}
<tendon><fixed name="t" range="-1 1"><joint joint="hinge" coef="1"/></fixed></tendon>
<actuator><motor name="m" joint="hinge"/></actuator>
<sensor>
  <touch site="sa"/><accelerometer site="sa" noise=".1"/><velocimeter site="sa"/>
  <gyro site="sa" cutoff="3"/><force site="sa"/><torque site="sa"/><magnetometer site="sa"/>
  <camprojection site="sa" camera="cam"/><rangefinder site="sa"/>
  <rangefinder camera="cam" data="normal"/>
  <jointpos joint="hinge"/><jointvel joint="slide"/><tendonpos tendon="t"/>
  <tendonvel tendon="t"/><actuatorpos actuator="m"/><actuatorvel actuator="m"/>
  <actuatorfrc actuator="m"/><jointactuatorfrc joint="hinge"/><tendonactuatorfrc tendon="t"/>
  <ballquat joint="ball"/><ballangvel joint="ball"/>
  <jointlimitpos joint="hinge"/><jointlimitvel joint="slide"/><jointlimitfrc joint="hinge"/>
  <tendonlimitpos tendon="t"/><tendonlimitvel tendon="t"/><tendonlimitfrc tendon="t"/>
  <framepos objtype="body" objname="b"/>
  <framequat objtype="xbody" objname="b" reftype="site" refname="sa"/>
  <framexaxis objtype="geom" objname="ga" reftype="body" refname="a"/>
  <frameyaxis objtype="site" objname="sb"/><framezaxis objtype="camera" objname="cam"/>
  <framelinvel objtype="body" objname="b" reftype="camera" refname="cam"/>
  <frameangvel objtype="site" objname="sa"/><framelinacc objtype="site" objname="sa"/>
  <frameangacc objtype="body" objname="a"/>
  <subtreecom body="a"/><subtreelinvel body="a"/><subtreeangmom body="a"/>
  <insidesite objtype="body" objname="b" site="sa"/>
  <insidesite objtype="geom" objname="gb" site="sa" enclosed="true"/>
  <distance geom1="ga" geom2="gb" cutoff="1"/><normal body1="a" body2="b"/>
  <fromto geom1="ga" body2="b"/>
  <contact geom1="ga" geom2="gb" num="3" data="force" reduce="mindist"/>
  <contact body1="a" subtree2="b"/><contact site="sa" data="linvel"/>
  <contact subtree1="a" body2="b" reduce="netforce" num="2" data="torque"/>
  <contact site="sa" geom2="gb" data="tangent"/><contact data="dist" reduce="maxforce"/>
  <e_potential/><e_kinetic/><clock noise=".1" cutoff="2" user="1 2" interval=".1 0"/>
  <user objtype="site" objname="sa" dim="4" datatype="quaternion" needstage="vel"/>
  <user objtype="body" objname="a" dim="2" user="5"/>
</sensor></mujoco>"""

KEYFRAME_XML = f"""<mujoco>{_TREE}
<actuator><motor joint="hinge"/><general joint="slide" dyntype="integrator"/></actuator>
<keyframe>
  <key/>
  <key name="k" time="1" qpos="1 2 3 1 0 0 0 .5 1 0 0 0 .1 .2" qvel="1 2 3 4 5 6 7"
       act="3" ctrl="1 2" mpos="4 5 6" mquat="0 2 0 0"/>
  <key qpos="1 2" ctrl="3"/>
</keyframe>
<custom><numeric name="n1" data="1 2"/><numeric name="n2" size="4" data="3"/>
  <numeric name="n3" size="2"/><text name="t" data="hello"/></custom>
</mujoco>"""

MODELS = {"tendon": TENDON_XML, "equality": EQUALITY_XML, "contact": CONTACT_XML,
          "actuator": ACTUATOR_XML, "sensor": SENSOR_XML, "keyframe": KEYFRAME_XML}
# What each model leaves to set_const (dynamics or wrapping at qpos0/qpos_spring).
EXPECTED_PENDING = {
    "tendon": ["tendon_invweight0", "tendon_length0", "tendon_lengthspring"],
    "equality": ["tendon_invweight0"],
    "contact": [],
    "actuator": ["actuator_acc0", "actuator_biasprm", "actuator_length0", "tendon_invweight0"],
    "sensor": ["actuator_acc0", "tendon_invweight0"],
    "keyframe": ["actuator_acc0"],
}


@pytest.fixture(scope="module")
def compiled():
    """Each model compiled once: (mjModel, our fields, pending list, context)."""
    return {name: _run_passes(xml) for name, xml in MODELS.items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_element_fields_match_mujoco(compiled, name):
    mjm, fields, pending, _ = compiled[name]
    assert pending == EXPECTED_PENDING[name]
    skip = set(pending)
    if name == "tendon":
        # Only the geom-wrapping tendon (s2) and the one straight tendon whose sites move
        # with qpos_spring (s1) need set_const; every other entry is exact here.
        rows = [0, 1, 2, 3, 5, 6]
        assert_close("tendon_length0", fields["tendon_length0"][rows],
                     mjm.tendon_length0[rows], RTOL)
        rows = [0, 1, 2, 5, 6]
        assert_close("tendon_lengthspring", fields["tendon_lengthspring"][rows],
                     mjm.tendon_lengthspring[rows], RTOL)
    if name == "actuator":
        # Only the dampratio entry (biasprm[2] of the tendon position servo) is pending.
        ours, theirs = fields["actuator_biasprm"].copy(), mjm.actuator_biasprm.copy()
        ours[5, 2] = theirs[5, 2] = 0.0
        assert_close("actuator_biasprm", ours, theirs, RTOL)
        # actuator_length0 needs kinematics only for the refsite (17) and slider-crank (19)
        # transmissions; joint, tendon, site and body lengths at qpos0 are exact here.
        rows = [i for i in range(mjm.nu) if i not in (17, 19)]
        assert_close("actuator_length0", fields["actuator_length0"][rows],
                     mjm.actuator_length0[rows], RTOL)
    assert _compare(fields, mjm, skip) > 5


def test_names_in_mujoco_order(compiled):
    """Pairs and excludes are sorted by body signature; names follow their elements."""
    mjm, _, _, ctx = compiled["contact"]
    _names(ctx, mjm, "pair", mujoco.mjtObj.mjOBJ_PAIR)
    _names(ctx, mjm, "exclude", mujoco.mjtObj.mjOBJ_EXCLUDE)
    mjm, _, _, ctx = compiled["equality"]
    _names(ctx, mjm, "eq", mujoco.mjtObj.mjOBJ_EQUALITY)
    mjm, _, _, ctx = compiled["actuator"]
    _names(ctx, mjm, "actuator", mujoco.mjtObj.mjOBJ_ACTUATOR)


def test_custom_data(compiled):
    mjm, fields, _, _ = compiled["keyframe"]
    flat = [v for row in fields["numeric_data"] for v in row]
    assert_close("numeric_data", np.array(flat), mjm.numeric_data, RTOL)
    assert [len(r) for r in fields["numeric_data"]] == list(mjm.numeric_size)
    assert fields["text_data"] == ("hello",)
    assert fields["ntext"] == mjm.ntext and fields["nnumeric"] == mjm.nnumeric


# Default-class interplay of actuator shortcuts: a class holding one shortcut (or a general
# actuator) and an element of another kind. MuJoCo 4.0 keeps the class's parameters only for
# the same shortcut, or a general class with the shortcut's gain type.
_CLASS_OPS = [
    "", '<general gainprm="5 1" biasprm="1 2 3 4" dynprm="7 8"/>',
    '<general gaintype="affine" gainprm="5 1" biasprm="1 2 3 4"/>',
    '<general biastype="affine" gainprm="5 1" biasprm="1 -2 -3 4"/>',
    '<general dyntype="filter" gainprm="5 1" biasprm="1 2 3 4" dynprm="7 8"/>',
    '<general dyntype="filterexact" dynprm=".3"/>', '<position kp="10" kv="2" timeconst="3"/>',
    '<intvelocity kp="3" kv="1"/>', '<cylinder area="3" timeconst="4" bias="1 2 3"/>',
    "<motor/>", '<velocity kv="3"/>', '<muscle force="5" timeconst=".1 .2"/>',
    '<velocity kv="3"/><general ctrlrange="-1 1"/>',
    '<position kp="10"/><general gaintype="affine"/>',
    '<position kp="10"/><general biastype="none"/>', '<position kp="10" dampratio="2"/>',
    '<damper kv="3"/><general ctrlrange="0 1"/>', '<adhesion gain="3"/><general ctrlrange="0 1"/>',
    '<general actearly="true" dyntype="filter" ctrlrange="-1 1" gear="2 3" forcerange="-2 2" '
    'actrange="0 3"/>', '<cylinder diameter="2"/>',
]
_ELEMENT_OPS = [
    'motor joint="j"', 'position joint="j"', 'position joint="j" timeconst="0"',
    'position joint="j" kv="4"', 'velocity joint="j"', 'intvelocity joint="j"',
    'damper joint="j" ctrlrange="0 1"', 'cylinder joint="j"',
    'muscle joint="j" lengthrange="0 1"', 'general joint="j"',
    'general joint="j" gaintype="affine"', 'general joint="j" input="vel"',
    'adhesion body="b" ctrlrange="0 1"',
]


def test_actuator_shortcut_class_matrix():
    """Every (class content, element shortcut) combination MuJoCo accepts, field by field."""
    compared = 0
    for cls, elem in itertools.product(_CLASS_OPS, _ELEMENT_OPS):
        xml = (f'<mujoco><default><default class="a">{cls}</default></default><worldbody>'
               '<body name="b"><joint name="j" range="-1 2"/><geom size=".1"/></body>'
               f'</worldbody><actuator><{elem} class="a"/></actuator></mujoco>')
        try:
            mujoco.MjModel.from_xml_string(xml)
        except ValueError:
            with pytest.raises(MJCFError, match=r"<string>:1: <"):
                _run_passes_ours_only(xml)
            continue
        mjm, fields, pending, _ = _run_passes(xml)
        skip = set(pending)
        if "actuator_lengthrange" in skip:  # a muscle class behind a general element
            assert mjm.actuator_biastype[0] == mujoco.mjtBias.mjBIAS_MUSCLE
        _compare({k: v for k, v in fields.items() if k.startswith("actuator_")}, mjm, skip)
        compared += 1
    assert compared > 200


_SECTIONS = re.compile(r"<(actuator|tendon|equality|contact|sensor|keyframe|custom)>.*?</\1>"
                       r"|<size[^>]*/>", re.S)


def _run_passes_ours_only(xml: str) -> None:
    """Our passes over the tree of ``xml`` (taken from MuJoCo without the element sections,
    which MuJoCo rejects), for error cases."""
    _, ctx = _tree_context(_SECTIONS.sub("", xml))
    ctx.spec = parse(xml)
    for step in _PASSES:
        step(ctx)


def test_dampratio_and_inheritrange_rules():
    """biasprm[2] > 0 is a dampratio only on position-like actuators; inheritrange needs a
    fixed gain; both are measured on MuJoCo 4.0."""
    xml = f"""<mujoco>{_TREE}<actuator>
      <general joint="hinge" biastype="affine" biasprm="0 -1 3"/>
      <general joint="hinge" biastype="affine" biasprm="0 0 3"/>
      <general joint="hinge" biastype="affine" biasprm="0 -2 3" gainprm="1"/>
      <general joint="hinge" inheritrange=".5" biastype="affine" biasprm="0 -1 0"/>
      <general joint="hinge" inheritrange=".5" gaintype="affine" biastype="affine"
               biasprm="0 -1 0"/>
      <general joint="hinge" inheritrange=".5" dyntype="integrator" biastype="affine"
               biasprm="0 -1 0"/>
    </actuator></mujoco>"""
    mjm, fields, pending, _ = _run_passes(xml)
    assert "actuator_biasprm" in pending
    assert_close("actuator_biasprm", fields["actuator_biasprm"][1:],
                 mjm.actuator_biasprm[1:], RTOL)
    _compare({k: v for k, v in fields.items() if k.startswith("actuator_")}, mjm,
             set(pending))


def test_user_arrays():
    """nuser_* = -1 infers the longest user array; shorter ones are zero-padded."""
    xml = f"""<mujoco><size nuser_actuator="4" nuser_sensor="-1" nuser_tendon="2"/>{_TREE}
      <tendon><fixed name="t" user="1"><joint joint="hinge" coef="1"/></fixed></tendon>
      <actuator><motor joint="hinge" user="1 2"/><motor joint="hinge"/></actuator>
      <sensor><clock user="1 2 3"/><clock/></sensor></mujoco>"""
    mjm, fields, _, _ = _run_passes(xml)
    for kind in ("actuator", "sensor", "tendon"):
        assert fields[f"nuser_{kind}"] == getattr(mjm, f"nuser_{kind}")
        assert_close(f"{kind}_user", fields[f"{kind}_user"], getattr(mjm, f"{kind}_user"), RTOL)


# -- bad input: MuJoCo rejects each; we name file, line and element -------------------------
_BAD = {
    "unknown joint": ('<actuator>\n<motor name="m" joint="nope"/></actuator>', r":\d+: <motor"),
    "missing target": ("<actuator>\n<motor/></actuator>", r":\d+: <motor>.*transmission"),
    "crank length": ('<actuator>\n<general cranksite="sc" slidersite="sc2"/></actuator>',
                     r":\d+: <general>.*crank"),
    "refsite without site": ('<actuator>\n<motor joint="hinge" refsite="sa"/></actuator>',
                             r":\d+: <motor>.*refsite"),
    "kv and dampratio": ('<actuator>\n<position joint="hinge" kv="1" dampratio="1"/>'
                         "</actuator>", r":\d+: <position>.*kv and dampratio"),
    "inheritrange and ctrlrange": ('<actuator>\n<position joint="hinge" inheritrange="1" '
                                   'ctrlrange="0 1"/></actuator>', r":\d+: <position>"),
    "inheritrange without range": ('<actuator>\n<position joint="hinge2" inheritrange="1"/>'
                                   "</actuator>", r":\d+: <position>.*range"),
    "bad ctrlrange": ('<actuator>\n<motor joint="hinge" ctrllimited="true" ctrlrange="1 0"/>'
                      "</actuator>", r":\d+: <motor>.*range"),
    "negative adhesion range": ('<actuator>\n<adhesion body="c" ctrlrange="-1 1"/>'
                                "</actuator>", r":\d+: <adhesion>.*negative"),
    "actdim 0": ('<actuator>\n<general joint="hinge" dyntype="filter" actdim="0"/>'
                 "</actuator>", r":\d+: <general>.*actdim"),
    "delay without history": ('<actuator>\n<motor joint="hinge" delay=".1"/></actuator>',
                              r":\d+: <motor>.*delay"),
    "user too long": ('<size nuser_actuator="1"/><actuator>\n<motor joint="hinge" '
                      'user="1 2"/></actuator>', r":\d+: <motor>.*nuser_actuator"),
    "unknown tendon joint": ('<tendon>\n<fixed name="t"><joint joint="nope" coef="1"/></fixed>'
                             "</tendon>", r":\d+: <joint>.*nope"),
    "fixed tendon ball joint": ('<tendon>\n<fixed><joint joint="ball" coef="1"/></fixed>'
                                "</tendon>", r":\d+: <joint>.*slide or hinge"),
    "deadband order": ('<tendon>\n<fixed springlength="1 0"><joint joint="hinge" coef="1"/>'
                       "</fixed></tendon>", r":\d+: <fixed>.*springlength"),
    "unknown body in connect": ('<equality>\n<connect body1="nope" anchor="0 0 0"/>'
                                "</equality>", r":\d+: <connect>.*nope"),
    "connect without anchor": ('<equality>\n<connect body1="a"/></equality>',
                               r":\d+: <connect>.*anchor"),
    "mixed site and body": ('<equality>\n<weld body1="a" site1="sa" site2="sb"/></equality>',
                            r":\d+: <weld>"),
    "unknown pair geom": ('<contact>\n<pair geom1="ga" geom2="nope"/></contact>',
                          r":\d+: <pair>.*nope"),
    "bad pair condim": ('<contact>\n<pair geom1="ga" geom2="gb" condim="2"/></contact>',
                        r":\d+: <pair>.*condim"),
    "unknown exclude body": ('<contact>\n<exclude body1="a" body2="nope"/></contact>',
                             r":\d+: <exclude>.*nope"),
    "unknown sensor site": ('<sensor>\n<touch site="nope"/></sensor>', r":\d+: <touch>.*nope"),
    "ball sensor on hinge": ('<sensor>\n<ballquat joint="hinge"/></sensor>',
                             r":\d+: <ballquat>.*ball"),
    "limit sensor unlimited": ('<sensor>\n<jointlimitpos joint="hinge2"/></sensor>',
                               r":\d+: <jointlimitpos>.*limited"),
    "rangefinder two targets": ('<sensor>\n<rangefinder site="sa" camera="cam"/></sensor>',
                                r":\d+: <rangefinder>.*at most one"),
    "distance without second": ('<sensor>\n<distance geom1="ga"/></sensor>',
                                r":\d+: <distance>.*geom2"),
    "frame ref half": ('<sensor>\n<framepos objtype="body" objname="a" refname="sa"/>'
                       "</sensor>", r":\d+: <framepos>.*reftype"),
    "negative noise": ('<sensor>\n<jointpos joint="hinge" noise="-1"/></sensor>',
                       r":\d+: <jointpos>.*noise"),
    "key qpos too long": ('<keyframe>\n<key qpos="' + " ".join(["0"] * 20) + '"/></keyframe>',
                          r":\d+: <key>.*qpos"),
    "numeric too long": ('<custom>\n<numeric name="n" size="1" data="1 2"/></custom>',
                         r":\d+: <numeric name=\"n\">.*size"),
    "numeric empty": ('<custom>\n<numeric name="n"/></custom>', r":\d+: <numeric name=\"n\">"),
}


@pytest.mark.parametrize("case", sorted(k for k, v in _BAD.items() if v[1]))
def test_bad_input(case):
    body, pattern = _BAD[case]
    xml = f"<mujoco>{_TREE}{body}</mujoco>"
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=r"^<string>" + pattern):
        _run_passes_ours_only(xml)


def test_bad_wrap_geom():
    xml = (f"<mujoco>{_TREE}<tendon>\n<spatial><site site=\"sa\"/><geom geom=\"ga\"/>"
           "</spatial></tendon></mujoco>")
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=r"^<string>:\d+: <geom>.*between two sites"):
        _run_passes_ours_only(xml)


@pytest.mark.parametrize("body, what", [
    ('<actuator>\n<motor joint="hinge" nsample="2"/></actuator>', "history"),
    ('<sensor>\n<clock nsample="2"/></sensor>', "history"),
    ('<tendon>\n<fixed springyield="1"><joint joint="hinge" coef="1"/></fixed></tendon>',
     "springyield"),
    ('<custom>\n<tuple name="t"/></custom>', "tuple"),
])
def test_unsupported_features_are_errors(body, what):
    """Features MuJoCo 4.0 has and mjx_lite does not: an error with the location."""
    xml = f"<mujoco>{_TREE}{body}</mujoco>"
    with pytest.raises(MJCFError, match=rf"^<string>:\d+: <\w+.*unsupported: .*{what}"):
        _run_passes_ours_only(xml)


# -- the whole compiler ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def loaded(compiled):
    return {name: mjx_lite.load_model_from_string(xml) for name, xml in MODELS.items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_load_model_element_fields(loaded, compiled, name):
    """load_model_from_string carries the element passes' fields into the Model unchanged."""
    m = loaded[name]
    mjm, fields, pending, _ = compiled[name]
    ours = {k: getattr(m, k) for k in fields
            if hasattr(m, k) and k not in pending and k not in _NOT_MJMODEL}
    assert _compare({k: np.asarray(v) if not isinstance(v, int) else v
                     for k, v in ours.items()}, mjm) > 5


@pytest.mark.parametrize("options, pending", [
    ('<lengthrange uselimit="true"/>', False),
    ('<lengthrange mode="none"/>', False),
    ('<lengthrange mode="all" uselimit="true"/>', False),
    ('<lengthrange mode="muscleuser" uselimit="true"/>', False),
    ("", True),
])
def test_lengthrange_from_limits(options, pending):
    """compiler/lengthrange: useexisting keeps a given range, uselimit copies the target's
    limits; anything else needs the compile-time simulation (pending for set_const)."""
    xml = f"""<mujoco><compiler>{options}</compiler><worldbody>
      <body><joint name="hinge" range="-30 60"/><geom size=".1" pos="0 0 .5"/>
        <site name="sa" pos="0 0 1"/></body>
      <body pos="1 0 0"><joint type="slide" range="-1 1"/><geom size=".1"/><site name="sc"/>
      </body></worldbody>
      <tendon><fixed name="t" range="-.5 .7"><joint joint="hinge" coef="2"/></fixed>
        <spatial name="sp" range="0 3"><site site="sa"/><site site="sc"/></spatial></tendon>
      <actuator><muscle joint="hinge" gear="2"/><muscle tendon="t"/>
        <position joint="hinge"/><motor joint="hinge" lengthrange=".1 .2"/>
        <muscle tendon="sp"/><general joint="hinge" gaintype="user"/></actuator></mujoco>"""
    mjm, fields, pend, _ = _run_passes(xml)
    assert ("actuator_lengthrange" in pend) == pending
    if not pending:
        assert_close("actuator_lengthrange", fields["actuator_lengthrange"],
                     mjm.actuator_lengthrange, RTOL)


def test_lengthrange_simulated_matches_mujoco():
    """A muscle whose range nothing gives takes compiler/lengthrange's simulation
    (mj_setLengthRange); its ranges equal MuJoCo's to the simulation's rounding."""
    xml = """<mujoco><option timestep="0.01"/><worldbody>
      <body><joint name="hinge" range="-30 60" limited="true"/><geom size=".1" pos="0 0 .5"/>
      </body></worldbody>
      <tendon><fixed name="t"><joint joint="hinge" coef="2"/></fixed></tendon>
      <actuator><muscle joint="hinge" gear="2"/><muscle tendon="t"/></actuator></mujoco>"""
    ours = np.asarray(mjx_lite.load_model_from_string(xml).actuator_lengthrange)
    theirs = mujoco.MjModel.from_xml_string(xml).actuator_lengthrange
    assert np.all(theirs[:, 1] > theirs[:, 0])
    assert_close("actuator_lengthrange", ours, theirs, 1e-5)


def test_size_nkey_allocates_default_keys():
    xml = f"""<mujoco><size nkey="3"/>{_TREE}<keyframe><key qpos="1"/></keyframe></mujoco>"""
    mjm, fields, _, _ = _run_passes(xml)
    assert fields["nkey"] == mjm.nkey == 3
    for name in ("key_qpos", "key_qvel", "key_mpos", "key_mquat", "key_time"):
        assert_close(name, fields[name], getattr(mjm, name), RTOL)


# Two-level classes: a shortcut whose own class holds an incompatible actuator reads the
# parameters of the nearest compatible enclosing class (measured on MuJoCo 4.0).
_TWO_LEVEL = [
    ('<velocity kv="6"/>', "<motor/>", '<velocity joint="j" class="a"/>'),
    ('<intvelocity kp="7"/>', '<damper ctrlrange="0 1"/>', '<intvelocity joint="j" class="a"/>'),
    ('<adhesion gain="3" ctrlrange="0 1"/>', '<cylinder area="2"/>',
     '<adhesion body="b" class="a"/>'),
    ('<damper kv="4" ctrlrange="0 2"/>', '<cylinder area="2"/>', '<damper joint="j" class="a"/>'),
    ('<muscle range=".6 1.2"/>', "<position/>", '<muscle joint="j" lengthrange="0 1" class="a"/>'),
    ('<general biasprm="0 -2 1"/>', '<intvelocity inheritrange=".8" kp="7"/>',
     '<cylinder joint="j" class="a"/>'),
    ('<general biasprm="0 -2 1"/>', '<intvelocity inheritrange=".8" kp="7"/>',
     '<cylinder area="2" joint="j" class="a"/>'),
    ('<damper ctrlrange="0 1"/>', '<position inheritrange=".8"/>',
     '<velocity joint="j" class="a"/>'),
    ('<position kp="7" dampratio=".7"/>', '<general ctrlrange="-1 1"/>',
     '<general gaintype="affine" biastype="none" joint="j" class="a"/>'),
    ('<position kp="7" inheritrange=".8"/>', "", '<cylinder joint="j" class="a"/>'),
    ('<intvelocity kv="2" inheritrange=".8"/>', '<adhesion gain="3" ctrlrange="0 1"/>',
     '<intvelocity kp="7" joint="j" class="a"/>'),
]


@pytest.mark.parametrize("parent, child, element", _TWO_LEVEL)
def test_actuator_two_level_classes(parent, child, element):
    xml = (f'<mujoco><default><default class="p">{parent}<default class="a">{child}</default>'
           '</default></default><worldbody><body name="b"><joint name="j" range="-1 2"/>'
           f'<geom size=".1"/></body></worldbody><actuator>{element}</actuator></mujoco>')
    try:
        mujoco.MjModel.from_xml_string(xml)
    except ValueError:
        with pytest.raises(MJCFError, match=r"^<string>:1: <"):
            _run_passes_ours_only(xml)
        return
    mjm, fields, pending, _ = _run_passes(xml)
    _compare({k: v for k, v in fields.items() if k.startswith("actuator_")}, mjm,
             set(pending))


def test_sensor_data_token_lists():
    """contact and rangefinder ``data`` are ordered token lists packed into intprm[0]. The
    element's text is set after parsing so this pass is tested whatever the parser's typing."""
    tokens = {0: "found force dist", 1: "pos linvel", 2: "dist point normal",
              3: "force torque normal tangent"}
    body = ('<sensor><contact geom1="ga" geom2="gb" num="3" data="found"/>'
            '<contact site="sa" data="found"/><rangefinder camera="cam" data="dist"/>'
            '<contact body1="a" reduce="netforce" data="found"/></sensor>')
    xml = f"<mujoco>{_TREE}{body}</mujoco>"
    mjm_xml = xml
    for i, words in tokens.items():
        mjm_xml = mjm_xml.replace('data="found"' if i != 2 else 'data="dist"',
                                  f'data="{words}"', 1)
    mjm = mujoco.MjModel.from_xml_string(mjm_xml)
    _, ctx = _tree_context(xml)
    for i, el in enumerate(ctx.spec.section("sensor")):
        el.attrs["data"] = tokens[i]
    out = sensors.build_sensors(ctx)
    assert _compare(out, mjm) > 5


def test_body_margin_includes_gap():
    """body_margin is the largest margin + gap of the body's geoms (MuJoCo 4.0)."""
    xml = """<mujoco><worldbody><body><freejoint/>
      <geom size=".1" margin=".2" gap=".05"/><geom size=".1" margin=".1" gap=".3"/>
    </body></worldbody></mujoco>"""
    ours = mjx_lite.load_model_from_string(xml)
    ref = mujoco.MjModel.from_xml_string(xml)
    assert_close("body_margin", np.asarray(ours.body_margin), ref.body_margin, 1e-15)
