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
