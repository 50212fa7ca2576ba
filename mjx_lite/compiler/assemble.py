"""Compile driver: assets, the tree pass, element passes, options -> the Model pytree.

Public entry points ``load_model(path)`` and ``load_model_from_string(xml, assets)``.
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.compiler import build, hfield, lengthrange, parse, qpos0
from mjx_lite.compiler.context import Context
from mjx_lite.compiler.frames import quat_mul, quat_rotate, quat_to_mat
from mjx_lite.compiler.parse import Spec
from mjx_lite.errors import MJCFError
from mjx_lite.interop import (
    NAME_KINDS,
    geom_extra,
    geom_fluidshape,
    geom_reach,
    hfield_cell,
    tree_depth,
    wrap_sideid,
)
from mjx_lite.types import (
    ConeType,
    DisableBit,
    EnableBit,
    GeomType,
    IntegratorType,
    JacobianType,
    JointType,
    Model,
    Option,
    SameFrame,
    SolverType,
    Statistic,
)

_INTEGRATORS = {"euler": IntegratorType.EULER, "rk4": IntegratorType.RK4,
                "implicit": IntegratorType.IMPLICIT,
                "implicitfast": IntegratorType.IMPLICITFAST,
                "discrete": IntegratorType.DISCRETE}
_SOLVERS = {"pgs": SolverType.PGS, "cg": SolverType.CG, "newton": SolverType.NEWTON}


# fwdinv: mjData.solver_fwdinv (the forward/inverse discrepancy norms) is not computed
_UNSUPPORTED_ENABLE = EnableBit.SLEEP | EnableBit.IPC | EnableBit.SPECULATIVE | EnableBit.FWDINV
# geom types whose contacts may go through GJK/EPA (collision.nativeccd, hfield_ccd, convex):
# the pairs that opt.ccd_iterations, opt.ccd_tolerance and the nativeccd flag act on
_CCD_TYPES = (GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.MESH, GeomType.HFIELD)


def to_device(value) -> jax.Array:
    """A float array in jax's default float dtype (float64 under jax_enable_x64), converted
    in numpy first: converting on the device would compile one XLA program per shape."""
    dtype = jax.dtypes.canonicalize_dtype(np.float64)
    return jax.device_put(np.asarray(value, dtype=np.float64).astype(dtype))


def _compiler_settings(spec: Spec, ctx: Context) -> None:
    if spec.compiler("coordinate", "local") == "global":
        el = spec.root.find("compiler")[0]
        raise el.error("unsupported: coordinate='global' was removed from MuJoCo")
    for attr, bad in (("fusestatic", "true"), ("discardvisual", "true"), ("alignfree", "true")):
        if spec.compiler(attr, "false") == bad:
            el = next(e for e in spec.root.find("compiler") if e.has(attr))
            raise el.error(f"unsupported: compiler {attr}='true' is not implemented by mjx_lite")
    ctx.angle_scale = np.pi / 180 if spec.compiler("angle", "degree") == "degree" else 1.0
    seq = spec.compiler("eulerseq", "xyz")
    if len(seq) != 3 or any(c not in "xyzXYZ" for c in seq):
        el = spec.root.find("compiler")[0]
        raise el.error(f"attribute 'eulerseq' must be 3 characters from xyzXYZ, got '{seq}'")
    ctx.euler_seq = seq
    ctx.autolimits = spec.compiler("autolimits", "true") == "true"


def _assets(spec: Spec, ctx: Context) -> tuple[dict, dict, dict]:
    """Meshes, height fields, textures and materials in document order."""
    from mjx_lite.compiler import mesh as mesh_module

    meshes, hfields, fields = {}, {}, {}
    mats = []
    colliding = _colliding_meshes(spec)
    for el in spec.section("asset"):
        if el.tag == "mesh":
            name = el.attrs.get("name")
            if name is None and el.has("file"):
                name = mesh_module.default_mesh_name(el.get("file"))
            mesh_id = ctx.register("mesh", el, name=name or "")
            if el.has("file"):
                data = spec.read_file(el.get("file"), "mesh", el)
                vert, face = mesh_module.read_mesh_file(data, el.get("file"),
                                                        el.get("content_type"), el.where())
            elif el.has("vertex"):
                vert, face = el.get("vertex"), el.get("face")
            else:
                raise el.error("mesh needs a file or vertex data")
            if el.has("builtin"):
                raise el.error("unsupported: builtin meshes are not implemented by mjx_lite")
            meshes[mesh_id] = mesh_module.compile_mesh(
                vert, face, scale=el.vec("scale", (1, 1, 1)), refpos=el.vec("refpos", (0, 0, 0)),
                refquat=el.vec("refquat", (1, 0, 0, 0)), maxhullvert=el.get("maxhullvert", -1),
                inertia=el.get("inertia", "legacy"), where=el.where(),
                need_hull=(name or "") in colliding)
        elif el.tag == "hfield":
            name = el.attrs.get("name")
            if name is None and el.has("file"):
                name = os.path.splitext(os.path.basename(el.get("file")))[0]
            hf_id = ctx.register("hfield", el, name=name or "")
            if not el.has("size"):
                raise el.error("missing required attribute 'size'")
            if el.has("file"):
                data = spec.read_file(el.get("file"), "hfield", el)
                nrow, ncol, elev = hfield.read_hfield_file(data, el.get("file"),
                                                           el.get("content_type"), el.where())
                hfields[hf_id] = hfield.compile_hfield(nrow, ncol, elev, el.get("size"),
                                                       el.where(), from_file=True)
            else:
                hfields[hf_id] = hfield.compile_hfield(
                    el.get("nrow", 0), el.get("ncol", 0), el.get("elevation"), el.get("size"),
                    el.where())
        elif el.tag == "material":
            ctx.register("mat", el)
            mats.append(el)
        elif el.tag == "texture":
            ctx.register("tex", el)
            # Textures are visual, but a missing file fails compilation as in MuJoCo.
            for attr in ("file", "fileright", "fileleft", "fileup", "filedown", "filefront",
                         "fileback"):
                if el.has(attr):
                    spec.read_file(el.get(attr), "texture", el)
    fields["nmat"] = len(mats)
    fields["mat_rgba"] = np.array([m.vec("rgba", (1, 1, 1, 1)) for m in mats],
                                  dtype=np.float32).reshape(-1, 4)
    for attr, default in (("emission", 0.0), ("specular", 0.5), ("shininess", 0.5),
                          ("reflectance", 0.0), ("metallic", -1.0), ("roughness", -1.0)):
        fields[f"mat_{attr}"] = np.array([m.get(attr, default) for m in mats], dtype=np.float32)
    return meshes, hfields, fields


def _colliding_meshes(spec: Spec) -> set[str]:
    """Names of meshes used by a mesh geom that can collide: MuJoCo builds hulls only for
    those, so a visual-only mesh that qhull cannot handle still compiles."""
    names = set()
    stack = list(spec.root.find("worldbody"))
    while stack:
        el = stack.pop()
        stack.extend(el.children)
        if el.tag == "geom" and el.has("mesh") and el.get("type", "sphere") == "mesh" and (
                el.get("contype", 1) or el.get("conaffinity", 1)):
            names.add(el.get("mesh"))
    return names


def _mesh_fields(meshes: dict) -> dict:
    n = len(meshes)
    order = [meshes[i] for i in range(n)]
    vertnum = np.array([len(m.vert) for m in order], dtype=np.int32)
    facenum = np.array([len(m.face) for m in order], dtype=np.int32)
    return dict(
        nmesh=n, nmeshvert=int(vertnum.sum()), nmeshface=int(facenum.sum()),
        mesh_vertadr=np.concatenate([[0], np.cumsum(vertnum)[:-1]]).astype(np.int32)[:n],
        mesh_vertnum=vertnum, mesh_faceadr=np.concatenate(
            [[0], np.cumsum(facenum)[:-1]]).astype(np.int32)[:n], mesh_facenum=facenum,
        mesh_vert=np.concatenate([m.vert for m in order]).astype(np.float32) if n else
        np.zeros((0, 3), np.float32),
        mesh_face=np.concatenate([m.face for m in order]).astype(np.int32) if n else
        np.zeros((0, 3), np.int32),
        mesh_pos=np.array([m.pos for m in order], dtype=float).reshape(n, 3),
        mesh_quat=np.array([m.quat for m in order], dtype=float).reshape(n, 4),
        mesh_scale=np.array([m.scale for m in order], dtype=float).reshape(n, 3),
        **_graph_fields(order),
        **_polygon_fields(order),
    )


def _graph_fields(order: list) -> dict:
    """nmeshgraph, mesh_graphadr (-1 for a mesh without hull), mesh_graph (MuJoCo layout)."""
    from mjx_lite.compiler import mesh as mesh_module

    graphs = [mesh_module.mesh_graph(m) for m in order]
    sizes = np.array([len(g) for g in graphs], dtype=np.int64)
    adr = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if graphs else np.zeros(0)
    adr = np.where(sizes > 0, adr, -1).astype(np.int32)
    graph = np.concatenate(graphs).astype(np.int32) if graphs else np.zeros(0, np.int32)
    return dict(nmeshgraph=int(sizes.sum()), mesh_graphadr=adr, mesh_graph=graph)


def _polygon_fields(order: list) -> dict:
    """mesh_polynum, mesh_polyadr, mesh_polynormal, mesh_polyvertadr, mesh_polyvertnum,
    mesh_polyvert: each hull's faces merged into polygons (``mesh.mesh_polygons``)."""
    from mjx_lite.compiler import mesh as mesh_module

    normals, polys, num = [], [], []
    for m in order:
        nrm, ps = mesh_module.mesh_polygons(m)
        normals.append(nrm)
        polys.extend(ps)
        num.append(len(ps))
    num = np.asarray(num, np.int32)
    vnum = np.asarray([len(p) for p in polys], np.int32)
    return dict(
        mesh_polynum=num,
        mesh_polyadr=np.concatenate([[0], np.cumsum(num)[:-1]]).astype(np.int32)[:len(num)],
        mesh_polynormal=np.concatenate(normals).reshape(-1, 3) if normals else np.zeros((0, 3)),
        mesh_polyvertadr=np.concatenate([[0], np.cumsum(vnum)[:-1]]).astype(np.int32)[
            :len(vnum)],
        mesh_polyvertnum=vnum,
        mesh_polyvert=np.concatenate(polys).astype(np.int32) if polys else np.zeros(0, np.int32),
    )


def _hfield_fields(hfields: dict) -> dict:
    n = len(hfields)
    order = [hfields[i] for i in range(n)]
    sizes = [h.nrow * h.ncol for h in order]
    return dict(
        nhfield=n, nhfielddata=int(sum(sizes)),
        hfield_size=np.array([h.size for h in order], dtype=float).reshape(n, 4),
        hfield_nrow=np.array([h.nrow for h in order], dtype=np.int32),
        hfield_ncol=np.array([h.ncol for h in order], dtype=np.int32),
        hfield_adr=np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)[:n],
        hfield_data=np.concatenate([h.data for h in order]).astype(np.float32) if n else
        np.zeros(0, np.float32),
    )


def _option(spec: Spec) -> Option:
    """<option> and <option/flag> (seed F0:427-532; 4.0 disable/enable bit values)."""
    values = dict(timestep=0.002, impratio=1.0, tolerance=1e-8, ls_tolerance=0.01,
                  noslip_tolerance=1e-6, ccd_tolerance=1e-6, sleep_tolerance=1e-3,
                  gravity=np.array([0, 0, -9.81]), wind=np.zeros(3),
                  magnetic=np.array([0, -0.5, 0]), density=0.0, viscosity=0.0, o_margin=0.0,
                  o_solref=np.array([0.02, 1.0]), o_solimp=np.array([0.9, 0.95, 0.001, 0.5, 2]),
                  o_friction=np.array([1, 1, 0.005, 0.0001, 0.0001]))
    static = dict(integrator=IntegratorType.EULER, cone=ConeType.PYRAMIDAL,
                  jacobian=JacobianType.AUTO, solver=SolverType.NEWTON, iterations=100,
                  ls_iterations=50, noslip_iterations=0, ccd_iterations=35, disableflags=0,
                  enableflags=0, disableactuator=0, sdf_initpoints=40, sdf_iterations=10)
    for el in spec.root.find("option"):
        for attr in values:
            if el.has(attr):
                current = np.asarray(values[attr], dtype=float)
                given = np.atleast_1d(np.asarray(el.get(attr), dtype=float))
                if current.ndim:
                    current = current.copy()
                    current[: given.size] = given
                    values[attr] = current
                else:
                    values[attr] = float(given[0])
        if el.has("integrator"):
            static["integrator"] = _INTEGRATORS[el.get("integrator").lower()]
        if el.has("cone"):
            static["cone"] = ConeType[el.get("cone").upper()]
        if el.has("jacobian"):
            static["jacobian"] = JacobianType[el.get("jacobian").upper()]
        if el.has("solver"):
            static["solver"] = _SOLVERS[el.get("solver").lower()]
        for attr in ("iterations", "ls_iterations", "noslip_iterations", "ccd_iterations",
                     "sdf_initpoints", "sdf_iterations"):
            if el.has(attr):
                static[attr] = int(el.get(attr))
        if el.has("actuatorgroupdisable"):
            mask = 0
            for group in np.atleast_1d(el.get("actuatorgroupdisable")):
                if not 0 <= group <= 30:
                    raise el.error("actuatorgroupdisable groups must be in 0..30")
                mask |= 1 << int(group)
            static["disableactuator"] = mask
        for flag in el.find("flag"):
            for name, text in flag.attrs.items():
                key = name.upper()
                if key in DisableBit.__members__:
                    bit = int(DisableBit[key])
                    if text == "disable":
                        static["disableflags"] |= bit
                    else:
                        static["disableflags"] &= ~bit
                elif key in EnableBit.__members__:
                    bit = int(EnableBit[key])
                    if text == "enable":
                        if bit & _UNSUPPORTED_ENABLE:
                            raise flag.error(f"unsupported: flag '{name}' is not implemented")
                        static["enableflags"] |= bit
                    else:
                        static["enableflags"] &= ~bit
                else:
                    raise flag.error(f"unsupported: flag '{name}'")
    if static["integrator"] == IntegratorType.DISCRETE:
        el = spec.root.find("option")[-1]
        raise el.error("unsupported: the discrete integrator is not implemented by mjx_lite")
    return Option(**{k: to_device(v) for k, v in values.items()}, **static)


def _sizes(spec: Spec) -> dict:
    out = {"nuserdata": 0, "nkey": 0, "njmax": -1, "nconmax": -1}
    out.update({f"nuser_{k}": -1 for k in ("body", "jnt", "geom", "site", "cam", "tendon",
                                           "actuator", "sensor")})
    for el in spec.root.find("size"):
        for attr in list(out):
            if el.has(attr):
                out[attr] = int(el.get(attr))
        for attr in ("memory", "nstack"):
            if el.has(attr):
                pass  # memory sizing of MuJoCo's arena: JAX allocates per array, no arena
    return out


def compile_spec(spec: Spec) -> Model:
    """Compiles a parsed MJCF spec into a Model."""
    ctx = Context(spec)
    _compiler_settings(spec, ctx)
    sizes = _sizes(spec)
    meshes, hfields, f = _assets(spec, ctx)
    tb = build.TreeBuilder(ctx, meshes, hfields)
    tb.nuser = {k: sizes[f"nuser_{k}"] for k in ("body", "jnt", "geom", "site", "cam")}
    worlds = spec.root.find("worldbody")
    tb.run(worlds)
    for info in tb.geom:
        if info["type"] == 1:
            info["hfield_size"] = hfields[info["dataid"]].size
    build.world_poses(tb)
    f.update(_mesh_fields(meshes))
    f.update(_hfield_fields(hfields))
    f.update(build.joint_dof_fields(tb))
    f.update(build.tree_fields(tb, f))
    f.update(build.geom_fields(tb, f["nbody"]))
    f.update(build.body_inertia(tb, f, spec))
    f.update(_body_fields(tb, f, sizes))
    f.update(_site_fields(tb, f, sizes))
    f.update(_camera_light_fields(tb, f, sizes))
    f.update(body_xpos0=tb.xpos0, body_xquat0=tb.xquat0)
    ctx.fields.update(f)
    pending = []
    for step in _element_passes():
        out = step(ctx)
        pending.extend(out.pop("_pending", []))
        ctx.fields.update(out)
    ctx.fields.update(_tendon_coupling(ctx.fields))
    closed_form = qpos0.supported(ctx.fields)
    if closed_form:
        ctx.fields.update(qpos0.constants(ctx.fields))
    _check_options(spec, ctx.fields)
    model = _to_model(ctx, spec, sizes)
    if not closed_form:
        # Wrapping tendons and slider-crank/refsite transmissions: the JAX path (slower).
        from mjx_lite import const

        model = const.set_const(model, meaninertia=True)
    elif "tendon_lengthspring" in pending:
        # A spatial tendon's automatic spring length is its length at qpos_spring, which
        # differs from qpos0 here (joint ref or springref): kinematics at qpos_spring.
        from mjx_lite import const

        model = model.replace(tendon_lengthspring=const._lengthspring(model, None))
    model = _springdamper(model, tb)
    if ctx.lengthrange_actuators:
        ids = ctx.lengthrange_actuators
        ranges = lengthrange.compute(model, ids, lengthrange.settings(spec),
                                     spec.section("actuator")[ids[0]].where())
        model = model.replace(actuator_lengthrange=model.actuator_lengthrange.at[
            np.asarray(ids)].set(jp.asarray(ranges, dtype=model.actuator_lengthrange.dtype)))
    return model


def _springdamper(model: Model, tb) -> Model:
    """Joint springdamper="timeconst dampratio": stiffness and damping from the joint's
    inertia at qpos0, overriding the joint's own (XML reference, joint/springdamper). The
    inertia M is 1 / (the mean dof_invweight0 of its dofs), so k = M / (timeconst dampratio)^2
    and b = 2 M / timeconst on each of its dofs (measured on MuJoCo 4.0: slide, hinge, ball,
    free and armature; polynomial terms are kept)."""
    rows = [(j, info["springdamper"]) for j, info in enumerate(tb.jnt)
            if info["springdamper"][0] > 0]
    if not rows:
        return model
    invweight = np.asarray(model.dof_invweight0, dtype=float)
    dofadr = np.asarray(model.jnt_dofadr)
    stiffness = np.array(model.jnt_stiffness, dtype=float)
    damping = np.array(model.dof_damping, dtype=float)
    ndof = {JointType.FREE: 6, JointType.BALL: 3}
    for j, (timeconst, dampratio) in rows:
        adr = int(dofadr[j])
        end = adr + ndof.get(tb.jnt[j]["type"], 1)
        mass = 1.0 / invweight[adr:end].mean()
        stiffness[j] = mass / (timeconst * timeconst * dampratio * dampratio)
        damping[adr:end] = 2.0 * mass / timeconst
    return model.replace(jnt_stiffness=jp.asarray(stiffness, dtype=model.jnt_stiffness.dtype),
                         dof_damping=jp.asarray(damping, dtype=model.dof_damping.dtype))


def _check_options(spec: Spec, f: dict) -> None:
    """Fails on <option> settings this engine would otherwise ignore: the settings of
    MuJoCo's convex collision search where a pair may use it (our GJK/EPA port runs MuJoCo
    4.0's defaults, 35 iterations and tolerance 1e-6, and has no MPR)."""
    opt = spec.root.find("option")
    flags = [flag for el in opt for flag in el.find("flag")]
    gtype = np.asarray(f["geom_type"])
    collides = (np.asarray(f["geom_contype"]) | np.asarray(f["geom_conaffinity"])) != 0
    collides[np.asarray(f.get("pair_geom1", []), int)] = True
    collides[np.asarray(f.get("pair_geom2", []), int)] = True
    if not np.any(collides & np.isin(gtype, [int(t) for t in _CCD_TYPES])):
        return
    defaults = {"ccd_iterations": 35, "ccd_tolerance": 1e-6}
    for el in opt:
        for attr, value in defaults.items():
            if el.has(attr) and float(el.get(attr)) != value:
                raise el.error(f"unsupported: {attr}={el.get(attr)} (mjx_lite's convex "
                               f"collision search runs MuJoCo's default, {value}, and this "
                               "model has ellipsoid, cylinder, mesh or hfield contacts)")
    for flag in flags:
        if flag.attrs.get("nativeccd") == "disable":
            raise flag.error("unsupported: nativeccd='disable' (libccd's MPR) is not "
                             "implemented by mjx_lite, and this model has ellipsoid, "
                             "cylinder, mesh or hfield contacts")


def _body_fields(tb, f: dict, sizes: dict) -> dict:
    nbody = f["nbody"]
    mass = f["body_mass"]
    subtree = mass.copy()
    for b in range(nbody - 1, 0, -1):
        subtree[f["body_parentid"][b]] += subtree[b]
    mocap = np.array(tb.body["mocap"], dtype=bool)
    for b in np.nonzero(mocap)[0]:
        el = tb.body["el"][b]
        if f["body_parentid"][b] != 0 or f["body_jntnum"][b] > 0:
            raise el.error("mocap bodies must be children of the world body, without joints")
    mocapid = np.full(nbody, -1, dtype=np.int32)
    mocapid[mocap] = np.arange(mocap.sum())
    sameframe = np.array([build._sameframe(f["body_ipos"][b], f["body_iquat"][b], 0 * f[
        "body_ipos"][b], build._IDENTITY) for b in range(nbody)], dtype=np.uint8)
    sameframe[0] = 1
    gravcomp = np.array(tb.body["gravcomp"], dtype=float)
    simple = _simple(tb, f, sameframe)
    return dict(
        body_pos=np.array(tb.body["pos"]).reshape(nbody, 3),
        body_quat=np.array(tb.body["quat"]).reshape(nbody, 4),
        body_subtreemass=subtree, body_mocapid=mocapid, nmocap=int(mocap.sum()),
        body_sameframe=sameframe, body_gravcomp=gravcomp, ngravcomp=int((gravcomp > 0).sum()),
        body_user=build.user_array(tb.body["user"], tb.body["el"], sizes["nuser_body"], "body"),
        body_simple=simple,
    )


def _simple(tb, f: dict, sameframe: np.ndarray) -> np.ndarray:
    """body_simple before tendons: bodies whose dofs give a constant diagonal block of M."""
    nbody = f["nbody"]
    # Measured on MuJoCo 4.0: a child of the world, without children, whose inertial frame is
    # the body frame; 2 when all its joints are slides (value meanings from mjmodel.h).
    # A body is simple when its own block of M is diagonal (checked numerically, in the
    # body frame, which is its inertial frame here).
    parent = f["body_parentid"]
    has_children = np.zeros(nbody, dtype=bool)
    has_children[parent[1:]] = True
    # A child of the world, or of a jointless child of the world (measured on 4.0: one level
    # of welded parent counts as the world, two do not)
    rooted = np.array([b > 0 and (parent[b] == 0 or (parent[parent[b]] == 0 and not
                                                     tb.body_joints[parent[b]]))
                       for b in range(nbody)])
    simple = np.zeros(nbody, dtype=np.uint8)
    simple[0] = 1
    for b in range(1, nbody):
        jtypes = [tb.jnt[j]["type"] for j in tb.body_joints[b]]
        rotational = sum(t in (JointType.HINGE, JointType.BALL) for t in jtypes)
        # Two rotational joints couple through the configuration, whatever M is at qpos0.
        # <body simple="false"> opts out (measured on 4.0: body_simple 0)
        opted_out = tb.body["el"][b].get("simple") == "false"
        # every joint at the body origin, within the sameframe tolerance (measured on 4.0: a
        # slide joint 1e-6 off the origin makes the body not simple)
        centred = all(build._same(tb.jnt[j]["pos"], 0) for j in tb.body_joints[b])
        if rooted[b] and not has_children[b] and sameframe[b] == SameFrame.BODY and \
                rotational <= 1 and not opted_out and centred and _diagonal_block(tb, f, b):
            simple[b] = 2 if jtypes and all(t == JointType.SLIDE for t in jtypes) else 1
    return simple


def _tendon_coupling(f: dict) -> dict:
    """A tendon with armature couples what it passes through (its armature enters M), so
    those bodies, the world included, are not simple (measured on MuJoCo 4.0: a tendon
    without armature, fixed or spatial, leaves body_simple as it is)."""
    simple = f["body_simple"].copy()
    for t in range(f.get("ntendon", 0)):
        adr, num = f["tendon_adr"][t], f["tendon_num"][t]
        for w in range(adr, adr + num):
            wtype, obj = f["wrap_type"][w], f["wrap_objid"][w]
            if wtype == 1:  # joint
                body = f["jnt_bodyid"][obj]
            elif wtype == 3:  # site
                body = f["site_bodyid"][obj]
            elif wtype in (4, 5):  # sphere, cylinder
                body = f["geom_bodyid"][obj]
            else:
                continue
            if f["tendon_armature"][t] > 0:
                simple[body] = 0
    nv = f["nv"]
    simplenum = np.zeros(nv, dtype=np.int32)
    for d in range(nv - 1, -1, -1):
        if simple[f["dof_bodyid"][d]]:
            simplenum[d] = 1 + (simplenum[d + 1] if d + 1 < nv else 0)
    return dict(body_simple=simple, dof_simplenum=simplenum)


def _diagonal_block(tb, f: dict, b: int) -> bool:
    """Whether the body's dofs are mutually decoupled in M (spatial inertia at the origin)."""
    columns = []
    for j in tb.body_joints[b]:
        info = tb.jnt[j]
        jtype, pos, axis = info["type"], info["pos"], info["axis"]
        if jtype == JointType.FREE:
            columns.extend(np.eye(6))
        elif jtype == JointType.BALL:
            columns.extend(np.concatenate([e, np.cross(pos, e)]) for e in np.eye(3))
        elif jtype == JointType.HINGE:
            columns.append(np.concatenate([axis, np.cross(pos, axis)]))
        else:
            columns.append(np.concatenate([np.zeros(3), axis]))
    if not columns:
        return True
    motion = np.array(columns).T
    inertia6 = np.diag(np.concatenate([f["body_inertia"][b], np.full(3, f["body_mass"][b])]))
    block = motion.T @ inertia6 @ motion
    off = block - np.diag(np.diag(block))
    return bool(np.all(np.abs(off) <= 1e-10 * max(np.abs(block).max(), 1e-15)))


def _site_fields(tb, f: dict, sizes: dict) -> dict:
    s = tb.site
    n = len(s)
    col = lambda k, dtype=float, shape=(): np.array([i[k] for i in s], dtype=dtype).reshape(  # noqa: E731
        (n,) + shape)
    pos, quat = col("pos", float, (3,)), col("quat", float, (4,))
    bodyid = col("bodyid", np.int32)
    sameframe = np.array([build._sameframe(pos[i], quat[i], f["body_ipos"][bodyid[i]],
                                           f["body_iquat"][bodyid[i]]) for i in range(n)],
                         dtype=np.uint8)
    return dict(
        nsite=n, site_type=col("type", np.int32), site_bodyid=bodyid,
        site_matid=col("matid", np.int32), site_group=col("group", np.int32),
        site_sameframe=sameframe, site_size=col("size", float, (3,)), site_pos=pos,
        site_quat=quat, site_rgba=col("rgba", np.float32, (4,)),
        site_dataid=col("dataid", np.int32),
        site_user=build.user_array([i["user"] for i in s], tb.ctx.elements.get("site", []),
                                    sizes["nuser_site"], "site"),
    ) | _geom_sameframe(tb, f)


def _geom_sameframe(tb, f: dict) -> dict:
    g = tb.geom
    return {"geom_sameframe": np.array([
        build._sameframe(i["pos"], i["quat"], f["body_ipos"][i["bodyid"]],
                         f["body_iquat"][i["bodyid"]]) for i in g], dtype=np.uint8)}


def _subtree_com0(tb, f: dict) -> np.ndarray:
    nbody = f["nbody"]
    xipos = np.array([tb.xpos0[b] + quat_rotate(tb.xquat0[b], f["body_ipos"][b])
                      for b in range(nbody)])
    weighted = f["body_mass"][:, None] * xipos
    mass = f["body_mass"].copy()
    for b in range(nbody - 1, 0, -1):
        p = f["body_parentid"][b]
        weighted[p] += weighted[b]
        mass[p] += mass[b]
    com = np.where(mass[:, None] > 1e-15, weighted / np.maximum(mass, 1e-15)[:, None], 0.0)
    for b in range(nbody):
        if mass[b] <= 1e-15:
            com[b] = tb.xpos0[b]
    return com


def _camera_light_fields(tb, f: dict, sizes: dict) -> dict:
    ctx = tb.ctx
    com0 = _subtree_com0(tb, f)
    out = {}
    for kind, items in (("cam", tb.cam), ("light", tb.light)):
        n = len(items)
        target = []
        for info in items:
            if info["target"] is not None:
                target.append(ctx.lookup("body", info["target"], info["el"], "target"))
            else:
                target.append(-1)
        bodyid = np.array([i["bodyid"] for i in items], dtype=np.int32)
        # pos0: offset from the body in world orientation; poscom0: from the subtree com.
        pos0 = np.array([quat_rotate(tb.xquat0[i["bodyid"]], i["pos"])
                         for i in items]).reshape(n, 3)
        xpos = np.array([tb.xpos0[i["bodyid"]] for i in items]).reshape(n, 3)
        # Cameras and lights aimed at a target body measure from that body's subtree com.
        ref = np.array([t if t >= 0 and i["mode"] >= 3 else i["bodyid"]
                        for t, i in zip(target, items)], dtype=np.int32)
        out.update({
            f"n{kind}": n, f"{kind}_mode": np.array([i["mode"] for i in items], dtype=np.int32),
            f"{kind}_bodyid": bodyid, f"{kind}_targetbodyid": np.array(target, dtype=np.int32),
            f"{kind}_pos": np.array([i["pos"] for i in items]).reshape(n, 3),
            f"{kind}_pos0": pos0,
            f"{kind}_poscom0": xpos + pos0 - com0[ref].reshape(n, 3),
        })
        if kind == "cam":
            quat = np.array([i["quat"] for i in items]).reshape(n, 4)
            out.update(
                cam_quat=quat,
                cam_mat0=np.array([quat_to_mat(quat_mul(tb.xquat0[i["bodyid"]], q))
                                   for i, q in zip(items, quat)]).reshape(n, 3, 3),
                cam_fovy=np.array([i["fovy"] for i in items], dtype=float),
                cam_ipd=np.array([i["ipd"] for i in items], dtype=float),
                cam_resolution=np.array([i["resolution"] for i in items],
                                        dtype=np.int32).reshape(n, 2),
                cam_projection=np.array([i["projection"] for i in items], dtype=np.int32),
                cam_user=build.user_array([i["user"] for i in items],
                                           [i["el"] for i in items], sizes["nuser_cam"], "cam"),
            )
        else:
            direction = np.array([i["dir"] for i in items]).reshape(n, 3)
            out.update(
                light_dir=direction,
                light_dir0=np.array([quat_rotate(tb.xquat0[i["bodyid"]], i["dir"])
                                     for i in items]).reshape(n, 3),
                light_type=np.array([i["type"] for i in items], dtype=np.int32),
                light_castshadow=np.array([i["castshadow"] for i in items], dtype=bool),
                light_active=np.array([i["active"] for i in items], dtype=bool),
            )
            for attr in ("bulbradius", "intensity", "range", "cutoff", "exponent", "softness"):
                out[f"light_{attr}"] = np.array([i[attr] for i in items], dtype=np.float32)
            for attr in ("attenuation", "ambient", "diffuse", "specular"):
                out[f"light_{attr}"] = np.array([i[attr] for i in items],
                                                dtype=np.float32).reshape(n, 3)
    return out


def _element_passes():
    """The element passes after the tree, in dependency order (tendons before actuators)."""
    from mjx_lite.compiler import actuators, contact, equality, keyframe, sensors, tendon

    return (contact.build_contact, tendon.build_tendons, equality.build_equality,
            actuators.build_actuators, sensors.build_sensors, keyframe.build_keyframes,
            keyframe.build_custom)


def _to_model(ctx: Context, spec: Spec, sizes: dict) -> Model:
    f = dict(ctx.fields)
    # <size nkey> only reserves room; the keyframe pass counts the keys.
    f.update({k: v for k, v in sizes.items() if not k.startswith("nuser_") and k != "nkey"})
    for kind in ("body", "jnt", "geom", "site", "cam", "tendon", "actuator", "sensor"):
        key = f"{kind}_user"
        f[f"nuser_{kind}"] = int(np.shape(f[key])[1]) if key in f else 0
    values = {}
    names = tuple((k, tuple(ctx.names.get(k, []))) for k in NAME_KINDS)
    for field in dataclasses.fields(Model):
        name = field.name
        if name == "opt":
            values[name] = _option(spec)
        elif name == "stat":
            values[name] = _statistic(spec, f)
        elif name == "names":
            values[name] = names
        elif name == "body_depth":
            values[name] = tree_depth(f["body_parentid"])
        elif name == "wrap_sideid":
            values[name] = wrap_sideid(np.asarray(f["wrap_type"]), np.asarray(f["wrap_prm"]))
        elif name == "dof_depth":
            values[name] = tree_depth(f["body_parentid"])[f["dof_bodyid"]]
        elif name == "hfield_cell":
            values[name] = hfield_cell(f["hfield_size"], f["hfield_nrow"], f["hfield_ncol"])
        elif name == "geom_fluidshape":
            values[name] = geom_fluidshape(f["geom_fluid"], len(f["geom_type"]))
        elif name in ("geom_extra", "geom_reach"):
            extra = geom_extra(f["geom_margin"], f["geom_gap"], f["pair_geom1"],
                               f["pair_geom2"], f["pair_margin"], f["pair_gap"])
            values[name] = (extra if name == "geom_extra"
                            else geom_reach(f["geom_rbound"], extra, f["geom_type"]))
        elif name == "signature":
            values[name] = 0
        elif name not in f:
            values[name] = _const_placeholder(name, f)
        else:
            v = f[name]
            if field.type == "jax.Array":
                values[name] = to_device(v)
            elif field.type == "np.ndarray":
                values[name] = np.asarray(v)
            else:
                values[name] = v
    return Model(**values)


def _const_placeholder(name: str, f: dict):
    """Zeros for the qpos0 constants when set_const (JAX) will compute them; else an error."""
    shapes = {"dof_invweight0": (f["nv"],), "body_invweight0": (f["nbody"], 2),
              "dof_M0": (f["nv"],),
              "tendon_invweight0": (f.get("ntendon", 0),),
              "actuator_acc0": (f.get("nu", 0),)}
    if name in shapes:
        return jp.zeros(shapes[name], dtype=float)
    raise MJCFError(f"internal: the compiler produced no value for Model.{name}")


def _statistic(spec: Spec, f: dict) -> Statistic:
    """meanmass is the mean body mass; meaninertia comes from set_const (mean diagonal of M at
    qpos0). <statistic> overrides both, as in MuJoCo."""
    nbody = f["nbody"]
    # MuJoCo 4.0 reports 1 for a model with no body besides the world (measured).
    meanmass = float(f["body_mass"][1:].mean()) if nbody > 1 else 1.0
    values = dict(meaninertia=f.get("meaninertia", 1.0), meanmass=meanmass)
    for el in spec.root.find("statistic"):
        for attr in values:
            if el.has(attr):
                values[attr] = el.get(attr)
    return Statistic(**{k: to_device(v) for k, v in values.items()})


def load_model_from_string(xml: str | bytes, assets: dict[str, bytes] | None = None,
                           *, _filename: str = parse.STRING_FILE,
                           _model_dir: str | None = None) -> Model:
    """Compiles MJCF text. ``assets`` maps file names to bytes (meshes, hfields, includes);
    errors name the file ``<string>``."""
    spec = parse.parse(xml, _filename, _model_dir, assets)
    return compile_spec(spec)


def load_model(path: str) -> Model:
    """Compiles an MJCF file (includes and assets resolved relative to its folder)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MJCFError(f"{path}: file not found")
    with open(path, "rb") as f:
        data = f.read()
    return load_model_from_string(data, None, _filename=path,
                                  _model_dir=os.path.dirname(os.path.abspath(path)))
