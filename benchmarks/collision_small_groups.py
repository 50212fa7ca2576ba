"""One-process A/B of the collision scene's small type groups (at most ``convex.CHUNK`` pairs):
GJK/EPA and the contact rules on every pair (a dense vmap, before session 45) against
compacted to the pairs that pass the culling test, gathered across batch members (now).

    python benchmarks/collision_small_groups.py BATCH REPS ROUNDS [GROUP ...]

Each group's program is compiled both ways in one process, then called in alternation (REPS
calls each per round); prints jit seconds, the median call and the largest difference of the
valid contacts. Results: benchmarks/results/cpu_x32_collision_small_groups.md.
"""
import pathlib
import sys
import time

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import collision as cb  # noqa: E402

import mjx_lite  # noqa: E402
from mjx_lite import smooth  # noqa: E402
from mjx_lite.collision import convex, driver  # noqa: E402

batch, reps, rounds = (int(a) for a in sys.argv[1:4])
only = sys.argv[4:] or None
new_sd, new_rules = convex.signed_distances, convex.map_rules

def old_sd(type1, type2, geoms, active, grouped=True):
    n = active.shape[0]
    if n <= convex.CHUNK:
        return convex.lanes_vmap(lambda *g: convex.signed_distance(type1, type2, *g), n, *geoms)
    return new_sd(type1, type2, geoms, active, grouped)

def old_rules(rule, near, rows, costly):
    if costly and len(near) > convex.CHUNK:
        return convex.sparse_vmap(rule, near, rows)
    return convex.lanes_vmap(rule, len(near), *rows)

qpos, _, _ = cb.settled_qpos(cb.SCENE, 1000)
m = mjx_lite.load_model(cb.SCENE)
d0 = mjx_lite.make_data(m)
q = jax.numpy.asarray(cb._noisy(qpos, batch, cb._free_pos(m.jnt_type, m.jnt_qposadr)),
                      d0.qpos.dtype)
d = jax.block_until_ready(jax.vmap(lambda q: smooth.kinematics(m, d0.replace(qpos=q)))(q))
groups = [g for g in driver._groups(m) if len(g.geom1) <= convex.CHUNK]
for g in groups:
    name = "-".join(driver._G(t).name.lower() for t in g.types)
    if only and name not in only:
        continue
    comp = {}
    for label, (sd, rules) in (("before", (old_sd, old_rules)), ("after", (new_sd, new_rules))):
        convex.signed_distances, convex.map_rules = sd, rules
        fn = jax.jit(jax.vmap(lambda d, g=g: driver.group_contacts(m, d, g)))
        t0 = time.perf_counter()
        comp[label] = fn.lower(d).compile()
        t1 = time.perf_counter()
        jax.block_until_ready(comp[label](d))
        print(f"{name} ({len(g.geom1)} pairs) {label}: jit {t1 - t0:.1f} s", flush=True)
    convex.signed_distances, convex.map_rules = new_sd, new_rules
    times = {k: [] for k in comp}
    for _ in range(rounds):
        for k, c in comp.items():
            for _ in range(reps):
                t0 = time.perf_counter()
                jax.block_until_ready(c(d))
                times[k].append(time.perf_counter() - t0)
    a, b = comp["before"](d)[0], comp["after"](d)[0]
    va, vb = np.asarray(a["valid"]), np.asarray(b["valid"])
    diffs = [float((va != vb).sum())]
    for k in a:
        x, y = np.asarray(a[k])[va], np.asarray(b[k])[va]
        diffs.append(float(np.max(np.abs(x.astype(float) - y.astype(float)))) if x.size else 0.0)
    print("valid", int(va.sum()), "diffs", diffs)
    print(f"{name}: before median {np.median(times['before']) * 1e3:.1f} ms, after "
          f"{np.median(times['after']) * 1e3:.1f} ms (batch {batch}, {len(times['after'])} calls);"
          f" max valid-contact difference {max(diffs):.2e}", flush=True)
