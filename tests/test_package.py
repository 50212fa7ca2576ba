"""The package contract: import hygiene, pickling, pytree round trips, retracing, batching,
and the bundled models."""

from __future__ import annotations

import pathlib
import pickle
import subprocess
import sys

import chex
import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.dataclasses import PyTreeNode

from conftest import MODELS_DIR, REPO_ROOT

MODEL_FILES = sorted(p.name for p in MODELS_DIR.glob("*.xml"))


def _load(name: str = "humanoid_like.xml") -> mjx_lite.Model:
    return mjx_lite.load_model(MODELS_DIR / name)


def _assert_same(a, b, path: str = "") -> None:
    """Field-by-field equality of two pytree nodes (arrays by value, dtype and shape)."""
    assert type(a) is type(b), path
    if isinstance(a, PyTreeNode):  # Model, Option, Data, Contact, ...
        for name in a.fields():
            _assert_same(getattr(a, name), getattr(b, name), f"{path}.{name}")
    elif hasattr(a, "shape") and hasattr(a, "dtype"):
        assert (a.shape, a.dtype) == (b.shape, b.dtype), path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)
    else:
        assert a == b, path


def test_import_does_not_import_mujoco():
    code = "import sys, mjx_lite; print(sorted(m for m in sys.modules if m.startswith('mujoco')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_string():
    assert isinstance(mjx_lite.__version__, str) and mjx_lite.__version__.count(".") == 2


@pytest.fixture(scope="module")
def model() -> mjx_lite.Model:
    return _load()


def test_model_is_float64_under_x64(model):
    assert model.body_mass.dtype == jp.float64
    assert model.opt.timestep.dtype == jp.float64


def test_pickle_round_trip(model):
    d = mjx_lite.make_data(model)
    _assert_same(pickle.loads(pickle.dumps(model)), model)
    _assert_same(pickle.loads(pickle.dumps(d)), d)


def test_tree_flatten_round_trip(model):
    d = mjx_lite.make_data(model)
    for node in (model, d):
        leaves, treedef = jax.tree_util.tree_flatten(node)
        assert all(isinstance(x, jax.Array) for x in leaves)
        rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
        _assert_same(rebuilt, node)
        assert jax.tree_util.tree_structure(rebuilt) == treedef


def test_static_fields_are_not_leaves(model):
    leaves = jax.tree_util.tree_leaves(model)
    # Topology (int arrays) is treedef metadata; physical parameters are leaves.
    assert not any(jp.issubdtype(x.dtype, jp.integer) for x in leaves)
    assert any(x is model.body_mass for x in leaves)


def test_equal_structure_model_does_not_retrace(model):
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def weight(m: mjx_lite.Model, d: mjx_lite.Data) -> jax.Array:
        return jp.sum(m.body_mass) * -m.opt.gravity[2] + jp.sum(d.qpos) * m.nq

    d = mjx_lite.make_data(model)
    first = weight(model, d)
    reloaded = _load()  # a new Model object built from the same file
    heavier = model.replace(body_mass=model.body_mass * 2.0)
    np.testing.assert_allclose(weight(reloaded, d), first, rtol=1e-15)
    expected = 2 * np.sum(model.body_mass) * 9.81 + np.sum(d.qpos) * model.nq
    np.testing.assert_allclose(weight(heavier, d), expected, rtol=1e-12)


def test_different_structure_retraces(model):
    """The counterpart: a change to a static field is a new program (guards the test above)."""
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def total(m: mjx_lite.Model) -> jax.Array:
        return jp.sum(m.body_mass)

    total(model)
    other = _load("box_stack.xml")
    with pytest.raises(AssertionError):
        total(other)


def test_vmap_over_models_with_different_body_mass(model):
    scales = jp.linspace(0.5, 2.0, 4)
    batch = jax.vmap(lambda s: model.replace(body_mass=model.body_mass * s))(scales)
    assert batch.body_mass.shape == (4, model.nbody)
    assert batch.body_parentid is model.body_parentid or np.array_equal(
        batch.body_parentid, model.body_parentid)
    in_axes = jax.tree_util.tree_map(lambda _: None, model).replace(body_mass=0)
    totals = jax.vmap(lambda m: jp.sum(m.body_mass), in_axes=(in_axes,))(batch)
    np.testing.assert_allclose(totals, scales * np.sum(model.body_mass), rtol=1e-12)
    grad = jax.grad(lambda m: jp.sum(m.body_mass ** 2))(model)
    np.testing.assert_allclose(grad.body_mass, 2 * np.asarray(model.body_mass))


def test_demo_model_matches_models_dir():
    shipped = pathlib.Path(mjx_lite.__file__).parent / "assets" / "pendulum.xml"
    assert shipped.read_bytes() == (MODELS_DIR / "pendulum.xml").read_bytes()


def test_mesh_scene_has_a_large_hull():
    m = mujoco.MjModel.from_xml_path(str(MODELS_DIR / "mesh_scene.xml"))
    hull_vert = [int(m.mesh_graph[a]) for a in m.mesh_graphadr if a >= 0]
    assert max(hull_vert) >= 500


@pytest.mark.parametrize("name", MODEL_FILES)
def test_model_is_stable_in_mujoco(name):
    """Each bundled model compiles and runs 1000 steps under MuJoCo without a warning."""
    m = mujoco.MjModel.from_xml_path(str(MODELS_DIR / name))
    d = mujoco.MjData(m)
    if m.nkey:
        mujoco.mj_resetDataKeyframe(m, d, 0)
    phase = np.arange(m.nu)
    for i in range(1000):
        d.ctrl[:] = 0.3 * np.sin(0.01 * i + phase)
        mujoco.mj_step(m, d)
    assert [w.number for w in d.warning] == [0] * len(d.warning)
    assert np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))
    assert np.max(np.abs(d.qvel), initial=0.0) < 100.0


def test_double_pendulum_conserves_energy():
    m = mujoco.MjModel.from_xml_path(str(MODELS_DIR / "double_pendulum.xml"))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    energy = []
    for _ in range(2000):
        mujoco.mj_step(m, d)
        energy.append(np.sum(d.energy))
    assert np.ptp(energy) < 1e-6 * np.max(np.abs(energy))


def test_repo_layout():
    for path in ("pyproject.toml", "README.md", ".ci/run", ".github/workflows/ci.yml",
                 "docs/mujoco_deltas.md", "benchmarks/README.md"):
        assert (REPO_ROOT / path).is_file(), path


def test_make_data_under_jit_and_vmap_equals_eager(model):
    """make_data builds its arrays in numpy; traced model fields (a jitted or vmapped call,
    e.g. randomized initial poses) take the traced path and give the same Data."""
    eager = mjx_lite.make_data(model)
    _assert_same(jax.jit(mjx_lite.make_data)(model), eager)
    qpos0 = np.stack([np.asarray(model.qpos0) + 0.1 * k for k in range(3)])
    batched = jax.vmap(lambda q: mjx_lite.make_data(model.replace(qpos0=q)))(qpos0)
    np.testing.assert_array_equal(batched.qpos, qpos0)
    member = jax.tree.map(lambda x: jp.asarray(x[1]), batched)
    _assert_same(member, eager.replace(qpos=jp.asarray(qpos0[1])))
