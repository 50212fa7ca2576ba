"""The MJCF compiler against MuJoCo 4.0: every carried field, on real and written models."""

from __future__ import annotations

import pathlib

import mujoco
import numpy as np
import pytest
from model_parity import carried_fields, compare_model, failures, listed_fields

import mjx_lite

from conftest import GYM_ASSETS, MJX_TEST_DATA, MODELS_DIR

# A small but feature-dense CI-tier set; the acceptance tier runs every model.
CI_MODELS = [GYM_ASSETS / "ant.xml", GYM_ASSETS / "humanoid.xml", GYM_ASSETS / "half_cheetah.xml",
             MJX_TEST_DATA / "pendula.xml", MJX_TEST_DATA / "convex.xml"]


def _all_models() -> list[pathlib.Path]:
    paths = sorted(GYM_ASSETS.glob("*.xml")) + sorted(MJX_TEST_DATA.rglob("*.xml"))
    paths += sorted(MODELS_DIR.glob("*.xml"))
    out = []
    for p in paths:
        try:
            mujoco.MjModel.from_xml_path(str(p))
        except Exception:  # noqa: BLE001 - only models MuJoCo 4.0 compiles are test data
            continue
        out.append(p)
    return out


def test_model_fields_listed_and_compared():
    listed = listed_fields()
    assert sorted(listed) == sorted(carried_fields()), (
        "tests/model_fields.txt must list exactly the mjModel fields the Model carries")
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "ant.xml"))
    m = mjx_lite.load_model(GYM_ASSETS / "ant.xml")
    errors = compare_model(m, mjm)
    assert set(listed) <= set(errors), "every listed field must be compared"


@pytest.mark.parametrize("path", CI_MODELS, ids=lambda p: p.name)
def test_compiled_model_matches_mujoco(path):
    mjm = mujoco.MjModel.from_xml_path(str(path))
    m = mjx_lite.load_model(path)
    bad = failures(compare_model(m, mjm))
    assert not bad, f"{path.name}:\n" + "\n".join(bad)


@pytest.mark.acceptance
def test_every_model_matches_mujoco(tmp_path):
    lines = []
    worst: dict[str, tuple[float, str]] = {}
    bad_all = []
    for path in _all_models():
        mjm = mujoco.MjModel.from_xml_path(str(path))
        m = mjx_lite.load_model(path)
        errors = compare_model(m, mjm)
        for k, (e, _, _) in errors.items():
            if e > worst.get(k, (-1.0, ""))[0]:
                worst[k] = (e, path.name)
        bad = failures(errors)
        bad_all.extend(f"{path.name}: {b}" for b in bad)
        lines.append(f"{path.relative_to(path.parents[1])}: {'ok' if not bad else len(bad)}")
    out = pathlib.Path(__file__).parent / "acceptance" / "compiler.txt"
    out.parent.mkdir(exist_ok=True)
    body = [f"{k}: worst relative error {e:.3g} ({where})" for k, (e, where) in sorted(
        worst.items()) if not k.startswith("names.")]
    out.write_text("models:\n" + "\n".join(lines) + "\n\nfields:\n" + "\n".join(body) + "\n")
    assert not bad_all, "\n".join(bad_all[:50])


def test_pickle_and_flatten_roundtrip():
    import pickle

    import jax

    m = mjx_lite.load_model(GYM_ASSETS / "hopper.xml")
    m2 = pickle.loads(pickle.dumps(m))
    leaves, treedef = jax.tree_util.tree_flatten(m)
    m3 = jax.tree_util.tree_unflatten(treedef, leaves)
    for other in (m2, m3):
        assert jax.tree_util.tree_structure(other) == treedef
        for a, b in zip(jax.tree_util.tree_leaves(other), leaves):
            np.testing.assert_array_equal(a, b)


def test_body_simple_attribute():
    """<body simple="false"> opts a body out of body_simple (4.0); the whole model matches."""
    xml = """<mujoco><worldbody>
      <body name="a" pos="0 0 1"><freejoint/><geom size=".1"/>
        <body name="b" simple="false" pos="0 0 .2"><geom size=".1"/></body></body>
      <body name="c" pos="1 0 0" simple="false"><geom size=".1"/></body>
      <body name="d" pos="2 0 0" simple="auto"><geom size=".1"/></body>
    </worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = mjx_lite.load_model_from_string(xml)
    np.testing.assert_array_equal(np.asarray(m.body_simple), mjm.body_simple)
    assert list(mjm.body_simple) == [1, 0, 0, 0, 1]
    bad = failures(compare_model(m, mjm))
    assert not bad, "\n".join(bad)


# Small models whose attributes the compiler once parsed and dropped, or got wrong (helperE's
# attribute audit): the whole model must match MuJoCo 4.0's.
AUDIT_XML = {
    # joint springdamper="timeconst dampratio": stiffness and damping from the joint inertia
    # (1 / dof_invweight0: a simple slider body's bare mass, armature left out)
    "springdamper": """<mujoco>
      <default><default class="sd"><joint springdamper=".3 .7"/></default></default>
      <worldbody>
        <body pos="0 0 1"><freejoint/><geom size=".1" pos=".1 .2 0"/>
          <body pos="0 0 .5"><joint type="ball" springdamper=".2 .5" damping="3"/>
            <geom size=".1" pos="0 0 .2"/>
            <body pos="0 0 .4"><joint class="sd" axis="0 1 0" stiffness="2 3 4" armature=".1"/>
              <joint type="slide" springdamper=".1 1"/><geom size=".1" pos=".2 0 .2"/></body>
          </body></body>
        <body pos="2 0 0"><joint type="free" springdamper=".2 .5"/><geom size=".1"/></body>
        <body pos="3 0 0"><joint type="slide" springdamper="0 0" stiffness="2"/>
          <geom size=".1"/></body>
        <body pos="4 0 0"><joint type="slide" springdamper=".2 .5" armature=".5"/>
          <geom size=".1" mass="2"/></body>
      </worldbody></mujoco>""",
    # tendons without armature leave body_simple alone (fixed and spatial)
    "tendon_simple": """<mujoco><worldbody>
        <body name="a" pos="0 0 1"><joint name="ja" axis="0 1 0"/><geom size=".1"/>
          <site name="sa"/></body>
        <body name="c" pos="1 0 0"><freejoint/><geom type="box" size=".1 .1 .1"/>
          <site name="sc" pos=".3 0 0"/></body>
        <body name="d" pos="2 0 0"><joint name="jd" type="slide"/><geom size=".1"/>
          <site name="sd"/></body>
        <body name="e" pos="3 0 0"><joint name="je" type="slide"/><geom size=".1"/></body>
        <site name="w" pos="0 0 3"/></worldbody>
      <tendon><spatial><site site="sa"/><site site="sc"/></spatial>
        <fixed><joint joint="ja" coef="1"/><joint joint="jd" coef="1"/></fixed>
        <spatial armature="1"><site site="w"/><site site="sd"/></spatial>
        <fixed armature=".5"><joint joint="je" coef="1"/></fixed></tendon></mujoco>""",
    # body_simple: joints off the body origin; a jointless parent that is a child of the world;
    # massless bodies, whose inertial frame MuJoCo 4.0 leaves at the body's own pos/quat
    "simple_and_massless": """<mujoco><worldbody><geom size=".1"/>
        <body pos="0 0 1"><joint type="slide" pos="0 0 .1"/><geom type="box" size=".1 .2 .3"/>
          </body>
        <body pos="1 0 1"><joint type="slide" pos="0 0 9e-7"/><geom size=".1"/></body>
        <body pos="2 0 1"><joint type="ball" pos=".1 0 0"/><geom size=".1"/></body>
        <body name="x" pos="1 2 3" euler="0 0 30">
          <body pos="0 0 1"><joint type="slide"/><geom size=".1"/></body></body>
        <body pos="3 0 0"><geom size=".2"/><body pos="0 0 1">
          <body pos="0 0 1"><joint type="slide"/><geom size=".1"/></body></body></body>
        <frame pos="1 1 1" euler="0 0 20"><body pos="1 2 3" zaxis="0 1 1"/></frame>
        <body pos="4 0 0"><geom size=".1" mass="0"/></body>
        <body mocap="true" pos="1 2 3" quat="0 1 0 0"><site/></body>
      </worldbody></mujoco>""",
    # bodies inside a <frame> are numbered in document order with their siblings
    "frame_body_order": """<mujoco><worldbody>
        <body name="a"><joint/><geom size=".1"/><body name="a1"><joint/><geom size=".1"/></body>
          <frame pos="0 0 1"><frame euler="0 0 30"><body name="b"><joint/><geom size=".1"/>
            <body name="b2"><geom size=".1"/></body></body></frame><body name="b3"/></frame>
          <body name="d"><geom size=".1"/></body></body>
        <frame><body name="e"><freejoint/><geom size=".1"/></body></frame>
        <body name="f"><geom size=".1"/></body></worldbody></mujoco>""",
    # mesh sites are sized like mesh geoms, and keep their own frame
    "mesh_site": """<mujoco><asset><mesh name="me" vertex="0 0 0 1 0 0 0 2 0 0 0 3 .6 .7 .9"/>
      </asset><worldbody><body pos="0 0 1"><freejoint/><geom size=".1"/>
        <geom type="mesh" mesh="me" pos="1 2 3" contype="0" conaffinity="0"/>
        <site name="s" pos="1 2 3" euler="10 20 30" type="mesh" mesh="me"/></body>
      </worldbody><sensor><framepos objtype="site" objname="s"/></sensor></mujoco>""",
    # a spatial tendon's automatic spring length is its length at qpos_spring (ref, springref)
    "spatial_lengthspring": """<mujoco><default><joint ref="10"/></default><worldbody>
        <body pos="0 0 1"><joint name="h" axis="0 1 0" springref="5"/><geom size=".1"/>
          <site name="sa" pos=".3 0 0"/>
          <body pos=".5 0 0"><joint name="s" type="slide" springref=".1"/><geom size=".1"/>
            <site name="sb" pos=".1 0 0"/></body></body>
        <site name="w" pos="1 0 0"/></worldbody>
      <tendon><spatial stiffness="10"><site site="sa"/><site site="w"/></spatial>
        <spatial stiffness="1"><site site="sb"/><site site="w"/></spatial>
        <fixed><joint joint="h" coef="1"/></fixed></tendon></mujoco>""",
    # ball and free joints never get actuatorfrclimited; intvelocity's actlimited follows
    # actrange alone
    "actuator_limits": """<mujoco><default><joint actuatorfrcrange="-1 1"/></default><worldbody>
        <body pos="0 0 1"><freejoint/><geom size=".1"/><body pos="0 0 .5">
          <joint type="ball" actuatorfrclimited="true"/><geom size=".1"/>
          <body pos="0 0 .5"><joint name="j" type="slide" range="-1 2"/><geom size=".1"/>
          </body></body></body></worldbody>
      <actuator><intvelocity joint="j" actlimited="true"/><intvelocity joint="j"/>
        <intvelocity joint="j" actrange="-1 1" actlimited="false"/>
        <intvelocity joint="j" actlimited="true" actrange="1 -1"/>
        <intvelocity joint="j" inheritrange="1"/></actuator></mujoco>""",
    # muscle activation dynamics alone do not ask for a compile-time length range
    "dyntype_muscle": """<mujoco><worldbody><body><joint name="j" type="slide" range="-.5 .5"/>
        <geom size=".1"/></body></worldbody>
      <actuator><general joint="j" dyntype="muscle"/>
        <general joint="j" dyntype="muscle" lengthrange=".1 .2"/></actuator></mujoco>""",
    # a user sensor without an object; a model without geoms
    "user_sensor": """<mujoco><worldbody><site name="s"/><body name="x" pos="1 0 0">
        <joint/><inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/></body></worldbody>
      <sensor><user dim="2"/><user dim="1" objtype="site" objname="s"/></sensor></mujoco>""",
}


@pytest.mark.parametrize("name", sorted(AUDIT_XML))
def test_audited_attributes_match_mujoco(name):
    xml = AUDIT_XML[name]
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = mjx_lite.load_model_from_string(xml)
    bad = failures(compare_model(m, mjm))
    assert not bad, "\n".join(bad)
    if name == "springdamper":
        assert np.count_nonzero(mjm.jnt_stiffness) == 6  # the attribute is in use


def test_fluid_added_mass():
    """fluidshape="ellipsoid" fills geom_fluid's virtual mass and inertia (columns 6-11, the
    added-mass terms of the fluid model). MuJoCo 4.0 takes them from a quadrature of Lamb's
    integrals, ours from their closed form: within 2e-6 relative; every other field as usual."""
    xml = """<mujoco><option density="1.2"/><worldbody><body><freejoint/>
      <geom type="sphere" size=".1" fluidshape="ellipsoid"/>
      <geom type="ellipsoid" size=".1 .2 .3" fluidshape="ellipsoid" fluidcoef=".4 .3 1.2 .9 .8"/>
      <geom type="capsule" size=".05 .2" fluidshape="ellipsoid"/>
      <geom type="cylinder" size=".1 .05" fluidshape="ellipsoid"/>
      <geom type="box" size=".3 .05 .2" fluidshape="ellipsoid"/><geom size=".1"/>
    </body></worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = mjx_lite.load_model_from_string(xml)
    np.testing.assert_allclose(np.asarray(m.geom_fluid), mjm.geom_fluid, rtol=2e-6, atol=0)
    assert np.count_nonzero(mjm.geom_fluid[:, 6:]) == 25
    bad = failures(compare_model(m, mjm, [f for f in listed_fields() if f != "geom_fluid"]))
    assert not bad, "\n".join(bad)
