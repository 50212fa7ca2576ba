"""Collision detection alone, per step: mjx_lite next to MJX and MuJoCo C in one run.

    python benchmarks/collision.py                      # models/collision_scene.xml, batch 1 256
    python benchmarks/collision.py --batches 1 64 --settle 200
    python benchmarks/collision.py --max-geom-pairs 80 cylinder_box=16 box_mesh=8 \
        cylinder_mesh=8 cylinder_cylinder=8 mesh_mesh=4

The scene (20 free boxes, 5 free cylinders, 5 free meshes of 642 hull vertices on a floor) is
settled by MuJoCo for ``--settle`` steps; collision is then timed at that pile (batch members
get 1 mm of position noise so they are not one state). Timed: mjx_lite's
``collision.collision`` (jit of a vmap over the batch, kinematics done beforehand and not
timed), MJX's ``mjx.collision`` the same way (when MJX accepts the scene), and MuJoCo C's
``mj_collision`` on one thread (a batch of B costs B times one call there). float32 unless
--x64. ``--max-geom-pairs`` gives mjx_lite the custom numerics of the same name (a number: every
type group; TYPE1_TYPE2=N: one group), so that only pairs passing the bounding-sphere test
reach the colliders (``mjx_lite.collision.driver``); a capped run reports the pairs that
pass per group and the CONTACTFULL count. Results go to stdout and to
benchmarks/results/<device>_<dtype>_collision[_capped].md.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys
import time

import jax
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from run import _in_child  # noqa: E402  (the child-process guard of the step benchmark)

SCENE = ROOT / "models" / "collision_scene.xml"


def settled_qpos(path, nsteps: int) -> tuple[np.ndarray, int, dict]:
    """qpos of the pile after ``nsteps`` MuJoCo steps, MuJoCo's contact count there, and its
    contacts per geom-type pair."""
    import mujoco

    mjm = mujoco.MjModel.from_xml_path(str(path))
    mjd = mujoco.MjData(mjm)
    for _ in range(nsteps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    names = {int(v): k[len("mjGEOM_"):].lower() for k, v in mujoco.mjtGeom.__members__.items()}
    kinds: dict = {}
    for g1, g2 in zip(mjd.contact.geom1[:mjd.ncon], mjd.contact.geom2[:mjd.ncon]):
        key = "-".join(sorted(names[int(mjm.geom_type[g])] for g in (g1, g2)))
        kinds[key] = kinds.get(key, 0) + 1
    return mjd.qpos.copy(), int(mjd.ncon), kinds


def _noisy(qpos: np.ndarray, batch: int, free_pos: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(0)
    q = np.repeat(qpos[None], batch, 0)
    q[1:, free_pos] += 1e-3 * rng.standard_normal((batch - 1, free_pos.size))
    return q


def _timed(fn, arg, reps: int) -> tuple[float, float, object]:
    """(jit seconds, seconds per call, output): compile timed apart from the first run."""
    t0 = time.perf_counter()
    compiled = fn.lower(arg).compile()
    jit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(arg))
    first = time.perf_counter() - t0
    print(f"  jit {jit_s:.1f} s, first call {first:.3f} s", flush=True)
    t0 = time.perf_counter()
    for _ in range(reps):
        out = jax.block_until_ready(compiled(arg))
    run = (time.perf_counter() - t0) / reps
    return jit_s, run, out


def capped_model(path: pathlib.Path, caps: list[str]) -> pathlib.Path:
    """A copy of the MJCF beside it (so its asset paths hold) with the max_geom_pairs
    custom numerics: "N" for every group, "TYPE1_TYPE2=N" for one."""
    from lxml import etree

    tree = etree.parse(str(path))
    custom = etree.SubElement(tree.getroot(), "custom")
    for cap in caps:
        name, _, value = cap.rpartition("=")
        etree.SubElement(custom, "numeric", name="max_geom_pairs" + ("_" + name if name else ""),
                         data=value)
    out = path.with_name(f".{path.stem}_capped.xml")
    tree.write(str(out))
    return out


def _collision_outputs(d):
    """The fields collision writes (contacts, their count, the warning counters)."""
    return d.contact, d.ncon, d.warning_count


def bench_mjx_lite(path, qpos, batches, reps: int, x64: bool, per_group: bool = False) -> dict:
    import jax.numpy as jp

    import mjx_lite
    from mjx_lite import smooth
    from mjx_lite.collision import driver, pairs

    if x64:
        jax.config.update("jax_enable_x64", True)
    m = mjx_lite.load_model(path)
    d0 = mjx_lite.make_data(m)
    out = {"pair_groups": len(pairs.pair_groups(m)), "slots": driver.contact_budget(m),
           "groups": []}
    # only what collision produces comes back: returning the whole Data would time a copy of
    # every other field too (this scene's efc_J: 10,660 x 180 per member)
    fn = jax.jit(jax.vmap(lambda d: _collision_outputs(driver.collision(m, d))))
    kin = jax.jit(jax.vmap(lambda q: smooth.kinematics(m, d0.replace(qpos=q))))
    for b in batches:
        q = jp.asarray(_noisy(qpos, b, _free_pos(m.jnt_type, m.jnt_qposadr)), d0.qpos.dtype)
        d = jax.block_until_ready(kin(q))
        if not out["groups"]:  # pairs passing the bounding-sphere test, member 0
            d_first = jax.tree.map(lambda x: x[0], d)
            for g in driver._groups(m):
                margin, gap = driver._params(m, g)[:2]
                near, _ = driver._sphere_cull(m, d_first, g.geom1, g.geom2, margin + gap)
                out["groups"].append(
                    ("-".join(driver._G(t).name.lower() for t in g.types), len(g.geom1),
                     int(near.sum()), driver.pair_slots(m, g)))
        jit_s, run_s, res = _timed(fn, d, reps)
        out[b] = {"jit_s": jit_s, "us_per_step": run_s / b * 1e6, "call_ms": run_s * 1e3,
                  "ncon": int(res[1][0]),
                  "contactfull": int(res[2][:, driver.WARN_CONTACTFULL].sum())}
        if per_group:  # each type group's collider alone, same state and batch
            out[b]["groups"] = []
            for g in driver._groups(m):
                gfn = jax.jit(jax.vmap(lambda d, g=g: driver.group_contacts(m, d, g)))
                name = "-".join(driver._G(t).name.lower() for t in g.types)
                print(f"  group {name}", flush=True)
                gjit, grun, _ = _timed(gfn, d, reps)
                out[b]["groups"].append((name, len(g.geom1), gjit, grun * 1e3))
    return out


def ab_grouping(path, qpos, batch: int, rounds: int) -> list[str]:
    """One process: the whole scene's collision with ``convex.compact_map`` grouping batch
    members (the default) and with each member compacting its own searches, both compiled,
    then called in alternation (2 calls each per round). Lines for the report."""
    import mjx_lite
    from mjx_lite import smooth
    from mjx_lite.collision import convex, driver

    plain = convex.compact_map
    mode = {"grouped": True}
    convex.compact_map = lambda f, mask, args, init, chunk=convex.CHUNK, grouped=True: plain(
        f, mask, args, init, chunk, grouped and mode["grouped"])
    try:
        m = mjx_lite.load_model(path)
        d0 = mjx_lite.make_data(m)
        q = jax.numpy.asarray(_noisy(qpos, batch, _free_pos(m.jnt_type, m.jnt_qposadr)),
                              d0.qpos.dtype)
        d = jax.block_until_ready(
            jax.vmap(lambda q: smooth.kinematics(m, d0.replace(qpos=q)))(q))
        compiled, lines = {}, []
        for on in (True, False):
            mode["grouped"] = on
            fn = jax.jit(jax.vmap(lambda d: _collision_outputs(driver.collision(m, d))))
            t0 = time.perf_counter()
            traced = fn.trace(d)
            t1 = time.perf_counter()
            compiled[on] = traced.lower().compile()
            t2 = time.perf_counter()
            jax.block_until_ready(compiled[on](d))
            lines.append(f"{'grouped' if on else 'per member'}: trace {t1 - t0:.1f} s, "
                         f"lower and compile {t2 - t1:.1f} s")
    finally:
        convex.compact_map = plain
    times = {True: [], False: []}
    for _ in range(rounds):
        for on in (True, False):
            for _ in range(2):
                t0 = time.perf_counter()
                jax.block_until_ready(compiled[on](d))
                times[on].append(time.perf_counter() - t0)
    for on in (True, False):
        t = np.array(times[on]) * 1e3
        lines.append(f"{'grouped' if on else 'per member'}, batch {batch}: median "
                     f"{np.median(t):.1f} ms, fastest {t.min():.1f} ms ({len(t)} calls)")
    same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(
        jax.tree.leaves(compiled[True](d)), jax.tree.leaves(compiled[False](d))))
    lines.append(f"outputs bitwise equal: {same}")
    return lines


def _free_pos(jnt_type, jnt_qposadr) -> np.ndarray:
    adr = np.asarray(jnt_qposadr)[np.asarray(jnt_type) == 0]
    return (adr[:, None] + np.arange(3)).reshape(-1)


def _mjx_batch(path, qpos, batch: int, reps: int, x64: bool) -> dict:
    import mujoco
    from mujoco import mjx

    if x64:
        jax.config.update("jax_enable_x64", True)
    mjm = mujoco.MjModel.from_xml_path(str(path))
    try:
        m = mjx.put_model(mjm)
        d0 = mjx.make_data(m)
        q = _noisy(qpos, batch, _free_pos(mjm.jnt_type, mjm.jnt_qposadr))
        kin = jax.jit(jax.vmap(lambda q: mjx.kinematics(m, d0.replace(qpos=q))))
        d = jax.block_until_ready(kin(q))
        # its contacts only, as for mjx_lite (not a copy of the whole Data)
        fn = jax.jit(jax.vmap(lambda d: getattr(getattr(mjx.collision(m, d), "_impl", None),
                                                "contact", None)))
        jit_s, run_s, res = _timed(fn, d, reps)
    except Exception as e:  # noqa: BLE001 - MJX rejects some pair types: report, don't crash
        return {"error": f"{type(e).__name__}: {e}".replace("\n", " ")[:160]}
    ncon = -1 if res is None else int(np.sum(np.asarray(res.dist[0]) < 0))
    return {"jit_s": jit_s, "us_per_step": run_s / batch * 1e6, "call_ms": run_s * 1e3,
            "ncon": ncon}


def bench_mujoco_c(path, qpos, reps: int) -> dict:
    import mujoco

    mjm = mujoco.MjModel.from_xml_path(str(path))
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = qpos
    mujoco.mj_kinematics(mjm, mjd)
    n = max(reps * 20, 2000)
    t0 = time.perf_counter()
    for _ in range(n):
        mujoco.mj_collision(mjm, mjd)
    return {"us_per_step": (time.perf_counter() - t0) / n * 1e6, "ncon": int(mjd.ncon)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(SCENE))
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 256])
    parser.add_argument("--settle", type=int, default=1000, help="MuJoCo steps before timing")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--x64", action="store_true")
    parser.add_argument("--no-mjx", action="store_true")
    parser.add_argument("--per-group", action="store_true",
                        help="also time each geom-type group's collider alone")
    parser.add_argument("--max-geom-pairs", nargs="+", default=[],
                        help="N (every group) and/or TYPE1_TYPE2=N (one group)")
    parser.add_argument("--ab-grouping", type=int, metavar="ROUNDS", default=0,
                        help="instead: one-process A/B of compact_map's batch grouping, "
                             "whole scene, at each batch (ROUNDS rounds of alternation)")
    args = parser.parse_args(argv)
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    path = pathlib.Path(args.model)
    qpos, mj_ncon, kinds = settled_qpos(path, args.settle)
    if args.ab_grouping:
        lines = [f"compact_map batch grouping A/B: {path.name} after {args.settle} MuJoCo "
                 f"steps, {jax.devices()[0].platform}, {os.cpu_count()} cpus"]
        for b in args.batches:
            lines += ab_grouping(path, qpos, b, args.ab_grouping)
        c = bench_mujoco_c(path, qpos, args.reps)
        lines.append(f"MuJoCo C (1 thread, mj_collision): {c['us_per_step']:.1f} us")
        print("\n".join(lines))
        dtype = "64" if args.x64 else "32"
        out = (ROOT / "benchmarks" / "results" /
               f"{jax.devices()[0].platform}_x{dtype}_collision_grouping.md")
        out.write_text("\n".join(lines) + "\n")
        print(f"written to {out.relative_to(ROOT)}")
        return
    ours_path = capped_model(path, args.max_geom_pairs) if args.max_geom_pairs else path
    try:
        ours = bench_mjx_lite(ours_path, qpos, args.batches, args.reps, args.x64,
                              args.per_group)
    finally:
        if ours_path != path:
            ours_path.unlink()
    peers = {}
    if not args.no_mjx:
        peers["MJX"] = {b: _in_child(_mjx_batch, (path, qpos, b, args.reps, args.x64), 1800)
                        for b in args.batches}
    c = bench_mujoco_c(path, qpos, args.reps)
    device = jax.devices()[0]
    dtype = "float64" if args.x64 else "float32"
    lines = [
        f"collision per step: {path.name} after {args.settle} MuJoCo steps; device "
        f"{device.platform} ({device.device_kind}), {os.cpu_count()} cpus, "
        f"{platform.processor() or platform.machine()}; {dtype}",
        f"MuJoCo's contacts there: {mj_ncon} ({', '.join(f'{k} {v}' for k, v in kinds.items())})"
        f"; mjx_lite: {ours['pair_groups']} pair-type groups, {ours['slots']} contact slots",
        "max_geom_pairs: " + (" ".join(args.max_geom_pairs) or "none (every candidate pair "
                                                                  "runs its collider)"),
        "pairs per group (candidates / passing the bounding-sphere test, member 0 / run): "
        + ", ".join(f"{n} {c}/{p}/{k}" for n, c, p, k in ours["groups"]),
        "", "| engine | batch | jit s | us per step | call ms | contacts (member 0) |",
        "|---|---|---|---|---|---|"]
    for b in args.batches:
        r = ours[b]
        lines.append(f"| mjx_lite | {b} | {r['jit_s']:.1f} | {r['us_per_step']:.1f} | "
                     f"{r['call_ms']:.2f} | {r['ncon']}; CONTACTFULL in {r['contactfull']} "
                     f"of {b} |")
        for name, res in peers.items():
            r = res[b]
            if "error" in r:
                lines.append(f"| {name} | {b} | | {r['error']} | | |")
            else:
                lines.append(f"| {name} | {b} | {r['jit_s']:.1f} | {r['us_per_step']:.1f} | "
                             f"{r['call_ms']:.2f} | {r['ncon']} (dist < 0) |")
    lines.append(f"| MuJoCo C (1 thread, mj_collision) | 1 | | {c['us_per_step']:.1f} | "
                 f"{c['us_per_step'] / 1e3:.3f} | {c['ncon']} |")
    for b in args.batches:
        if "groups" in ours[b]:
            lines += ["", f"mjx_lite per type group alone, batch {b}:", "",
                      "| group | pairs | jit s | call ms |", "|---|---|---|---|"]
            lines += [f"| {n} | {k} | {j:.1f} | {t:.2f} |" for n, k, j, t in ours[b]["groups"]]
    text = "\n".join(lines) + "\n"
    print(text)
    suffix = "_capped" if args.max_geom_pairs else ""
    out = ROOT / "benchmarks" / "results" / f"{device.platform}_x{dtype[5:]}_collision{suffix}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
