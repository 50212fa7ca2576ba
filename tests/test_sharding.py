"""A batch of cartpoles (5 steps of ``mjx_lite.step``) sharded over 4 host devices
(NamedSharding over a 1-D mesh) equals the unsharded run: bitwise at equal per-device batch,
and within ``TOL`` at equal total batch (float64).

The device count is fixed when XLA starts, so the check runs in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO_ROOT

TOL = 1e-12
ACCEPTANCE_FILE = REPO_ROOT / "tests" / "acceptance" / "sharding.txt"

_SCRIPT = textwrap.dedent("""
    import os
    import jax
    jax.config.update("jax_enable_x64", True)
    if os.environ["CACHE_DIR"] != "off":
        jax.config.update("jax_compilation_cache_dir", os.environ["CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    import jax.numpy as jp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import mjx_lite

    assert jax.device_count() == 4, jax.devices()
    m = mjx_lite.load_model(os.environ["MODEL"])
    d0 = mjx_lite.make_data(m)
    per_device, n = 2, 4

    def rollout(keys, actions):
        def init(k):
            return d0.replace(qpos=d0.qpos + jax.random.uniform(k, d0.qpos.shape, minval=-.5,
                                                                maxval=.5))
        def body(d, a):
            d = jax.vmap(lambda d, a: mjx_lite.step(m, d.replace(ctrl=a)))(d, a)
            return d, jp.concatenate([d.qpos, d.qvel], axis=-1)
        return jax.lax.scan(body, jax.vmap(init)(keys), actions)[1]

    keys = jax.random.split(jax.random.PRNGKey(0), per_device * n)
    actions = jax.random.uniform(jax.random.PRNGKey(1), (5, per_device * n, m.nu), minval=-1,
                                 maxval=1)
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    shard = lambda x, spec: jax.device_put(x, NamedSharding(mesh, spec))
    sharded = jax.jit(rollout)(shard(keys, P("batch")), shard(actions, P(None, "batch")))
    assert len(sharded.sharding.device_set) == n
    sharded = np.asarray(sharded)

    # equal per-device batch: each device's slice against an unsharded batch of the same size
    small = jax.jit(rollout)
    for i in range(n):
        sl = slice(i * per_device, (i + 1) * per_device)
        ref = np.asarray(small(keys[sl], actions[:, sl]))
        assert np.array_equal(sharded[:, sl], ref), (i, np.max(np.abs(sharded[:, sl] - ref)))

    # equal total batch on one device
    whole = np.asarray(jax.jit(rollout)(keys, actions))
    err = np.max(np.abs(whole - sharded)) / np.max(np.abs(whole))
    print("bitwise_total", np.array_equal(whole, sharded), "rel", err)
    assert err <= float(os.environ["TOL"]), err
""")


@pytest.mark.acceptance  # minutes of compile: kept out of the CI tier
def test_sharded_batch_equals_unsharded():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu", TOL=str(TOL), MODEL=str(REPO_ROOT / "models" / "cartpole.xml"),
               CACHE_DIR="off" if os.environ.get("MJX_LITE_CACHE_OFF") == "1" else
               os.environ.get("JAX_COMPILATION_CACHE_DIR", str(REPO_ROOT / ".jax_cache")))
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                         text=True, timeout=1200, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "bitwise_total" in out.stdout
    ACCEPTANCE_FILE.write_text(
        "# models/cartpole.xml, 8 members x 5 steps of mjx_lite.step, float64, sharded over 4 "
        "host devices (NamedSharding, 1-D mesh) vs unsharded\n"
        "per device (batch 2 each): bitwise equal to an unsharded batch of 2 (asserted)\n"
        f"equal total batch (8 on one device): {out.stdout.strip().splitlines()[-1]} "
        f"(bound {TOL})\n")
