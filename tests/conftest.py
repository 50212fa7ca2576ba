"""Test-wide JAX configuration and the paths of the test-data sets.

Float64 is on for every test: parity with MuJoCo C is checked at 1e-10, which float32 cannot
reach. JAX's persistent compilation cache is on so that a second run (and CI's second phase)
reuses compiled programs instead of paying XLA compile time again.
"""

from __future__ import annotations

import copy
import gc
import importlib.util
import os
import pathlib

import jax
import pytest

# A test whose xdist worker dies (XLA's compiler has crashed at random) runs once more before it
# counts as failed; pytest takes these hooks from this module's names.
from crash_rerun import (  # noqa: F401
    pytest_handlecrashitem,
    pytest_report_teststatus,
    pytest_terminal_summary,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent

jax.config.update("jax_enable_x64", True)
# A developer run caches compiled programs in .jax_cache/ (or JAX_COMPILATION_CACHE_DIR);
# JAX_COMPILATION_CACHE_DIR=off, as .ci/run sets it, runs without a cache: jax 0.10's cache
# write has crashed (SIGSEGV or abort in put_executable_and_time) in hour-long acceptance runs
# sharing a busy machine.
_CACHE_DIR = os.environ.get("JAX_COMPILATION_CACHE_DIR", str(REPO_ROOT / ".jax_cache"))
# pytest-xdist starts its workers after this file is imported, from this environment: the
# "off" is passed on in MJX_LITE_CACHE_OFF (before it was, the workers of a CI run took the
# popped variable for "no setting" and cached in .jax_cache, and one aborted there)
if os.environ.get("MJX_LITE_CACHE_OFF") == "1":
    _CACHE_DIR = "off"
# (JAX reads the variable itself too, so "off" is undone explicitly)
jax.config.update("jax_compilation_cache_dir", None if _CACHE_DIR == "off" else _CACHE_DIR)
if _CACHE_DIR == "off":  # and subprocesses (CLI tests) must not take "off" for a folder
    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    os.environ["MJX_LITE_CACHE_OFF"] = "1"
# Cache every program: the test suite is many small jits, each below the 1 s default threshold.
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# The CI tier's slowest files, seconds summed from --durations of a contended 2-core run
# (2026-12-04; only their order matters). pytest-xdist's ``--dist loadfile`` queues whole
# files, by default those with the most tests first: files of a few long compiles
# (test_rollout, test_smoothing) then started last, and one worker ran them alone while the
# other idled (the 89% -> 100% of a 31-min CI run took 10 min). Longest first instead, so the
# tail is the shortest files'.
FILE_SECONDS = {
    "test_solver.py": 987, "test_constraint.py": 672, "test_cli.py": 517, "test_grad.py": 503,
    "test_rollout.py": 450, "test_cylinder_multiccd.py": 356, "test_hfield_collision.py": 329,
    "test_collision.py": 312, "test_convex.py": 300, "test_island.py": 289,
    "test_smooth.py": 276, "test_envs.py": 209, "test_forward.py": 207,
    "test_smoothing.py": 170, "test_noslip.py": 150, "test_tendon.py": 156, "test_viewer.py": 80,
    "test_actuator.py": 74, "test_sensor.py": 72, "test_compile_elements.py": 70,
    "test_ray.py": 57, "test_interop.py": 55, "test_linalg.py": 49, "test_package.py": 46,
}


def pytest_configure(config):
    # xdist's default file order (most tests first) would undo the order set below
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """Longest files first (``FILE_SECONDS``); a stable sort keeps each file's own order."""
    items.sort(key=lambda item: -FILE_SECONDS.get(item.path.name, 0))


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs and traces after each test file. A worker of the CI tier
    otherwise keeps every file's programs to the end of the run: both workers held ~6.9 GB
    at the end of a full run on a 24 GB machine, the runs that died in XLA's compiler died
    late (at 68-98%), and test_constraint, test_sensor and test_convex in one process grew
    2.1 -> 2.4 -> 2.8 GB without this and stayed at 2.1-2.2 GB with it."""
    yield
    jax.clear_caches()
    gc.collect()


def _package_dir(name: str) -> pathlib.Path:
    # find_spec on a top-level name locates the package without importing it, so neither
    # gymnasium's env registry nor mujoco.mjx (which imports jax and warp) is loaded here.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is not installed; run pip install -e '.[test]'")
    return pathlib.Path(next(iter(spec.submodule_search_locations)))


MODELS_DIR = REPO_ROOT / "models"
GYM_ASSETS = _package_dir("gymnasium") / "envs" / "mujoco" / "assets"
MJX_TEST_DATA = _package_dir("mujoco") / "mjx" / "test_data"
# The seed documents live beside the clone (../shared); GitHub CI has no such checkout.
SEEDS_DIR = REPO_ROOT.parent / "shared" / "seeds"


@pytest.fixture(scope="session")
def models_dir() -> pathlib.Path:
    """The repository's models/ directory."""
    return MODELS_DIR


@pytest.fixture(scope="session")
def gym_assets() -> pathlib.Path:
    """gymnasium's envs/mujoco/assets directory (ant.xml, humanoid.xml, ...)."""
    return GYM_ASSETS


@pytest.fixture(scope="session")
def mjx_test_data() -> pathlib.Path:
    """The mujoco-mjx wheel's test_data directory (pendula.xml, humanoid/, tendon/, ...)."""
    return MJX_TEST_DATA


@pytest.fixture(scope="session")
def seeds_dir() -> pathlib.Path:
    """../shared/seeds; tests using it carry the ``seeds`` marker, which .ci/run deselects
    when the directory is absent, so reaching here without it is a real failure."""
    if not SEEDS_DIR.is_dir():
        pytest.fail(f"seed documents not found at {SEEDS_DIR}; run with -m 'not seeds'")
    return SEEDS_DIR


def without_pair_caps(mjm):
    """The model with MJX's ``max_geom_pairs`` numerics lifted: MuJoCo C ignores them, and
    where more pairs pass culling than the cap allows mjx_lite drops the farthest and counts
    CONTACTFULL, so a comparison with MuJoCo must not cap (humanoid/02_humanoids, cap 8:
    1.1 off at step 123 capped, within 1.1e-9 uncapped)."""
    import mujoco

    from mjx_lite.collision.driver import MAX_GEOM_PAIRS

    mjm = copy.copy(mjm)
    for i in range(mjm.nnumeric):
        if mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_NUMERIC, i).startswith(MAX_GEOM_PAIRS):
            mjm.numeric_data[mjm.numeric_adr[i]] = 1e9
    return mjm


def count_calls_by_size(monkeypatch, module, name: str) -> dict:
    """Replaces ``module.name`` (a JAX function whose first argument is a closed jaxpr) with
    one that counts its calls by the jaxpr's equation count, and returns the live counts:
    how many times tracing transformed each body."""
    counts: dict[int, int] = {}
    real = getattr(module, name)

    def counting(jaxpr, *args, **kw):
        size = len(jaxpr.jaxpr.eqns)
        counts[size] = counts.get(size, 0) + 1
        return real(jaxpr, *args, **kw)

    monkeypatch.setattr(module, name, counting)
    return counts
