"""Element tree -> flat numpy arrays in MuJoCo's order -> Model.

Seed ``000_14f7d172c1a5ccbe.txt``: compiler (F0:533), option (F0:427), size (F0:600),
(world)body/inertial/joint/freejoint/geom/site/camera/light (F0:852-1160), frame (F0:1355).
Bodies are numbered depth-first in document order (the world is 0); joints, dofs, geoms and sites
follow their bodies; a frame folds its transform into its children and vanishes.
"""

from __future__ import annotations

import numpy as np

from mjx_lite.compiler import frames, hfield, inertia
from mjx_lite.compiler import mesh as mesh_module
from mjx_lite.compiler.context import Context
from mjx_lite.compiler.frames import quat_mul, quat_rotate
from mjx_lite.compiler.parse import Element, Spec
from mjx_lite.passive import semiaxes
from mjx_lite.types import GeomType, JointType, SameFrame

_JOINT_TYPES = {"free": JointType.FREE, "ball": JointType.BALL, "slide": JointType.SLIDE,
                "hinge": JointType.HINGE}
_GEOM_TYPES = {"plane": GeomType.PLANE, "hfield": GeomType.HFIELD, "sphere": GeomType.SPHERE,
               "capsule": GeomType.CAPSULE, "ellipsoid": GeomType.ELLIPSOID,
               "cylinder": GeomType.CYLINDER, "box": GeomType.BOX, "mesh": GeomType.MESH,
               "sdf": GeomType.SDF}
_CAM_MODES = {"fixed": 0, "track": 1, "trackcom": 2, "targetbody": 3, "targetbodycom": 4}
_SOLREF = (0.02, 1.0)
_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
_FRICTION = (1.0, 0.005, 0.0001)
_RGBA = (0.5, 0.5, 0.5, 1.0)
_MINVAL = 1e-15
# Number of size parameters each geom type reads; the rest of geom_size stays zero.
_SIZE_COUNT = {GeomType.PLANE: 3, GeomType.SPHERE: 1, GeomType.CAPSULE: 2,
               GeomType.ELLIPSOID: 3, GeomType.CYLINDER: 2, GeomType.BOX: 3,
               GeomType.HFIELD: 0, GeomType.MESH: 0, GeomType.SDF: 0}
_FROMTO_TYPES = (GeomType.CAPSULE, GeomType.CYLINDER, GeomType.BOX, GeomType.ELLIPSOID)
_IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


class _Local:
    """A body-local placement: position and orientation relative to the owning body."""

    __slots__ = ("pos", "quat")

    def __init__(self, pos=(0.0, 0.0, 0.0), quat=_IDENTITY):
        self.pos = np.asarray(pos, dtype=float)
        self.quat = np.asarray(quat, dtype=float)

    def compose(self, pos, quat) -> _Local:
        return _Local(self.pos + quat_rotate(self.quat, pos), quat_mul(self.quat, quat))


# MuJoCo 4.0 treats frames closer than this (per coordinate) as the same (measured).
_SAMEFRAME_TOL = 1e-6


def _same(a, b, tol=_SAMEFRAME_TOL) -> bool:
    return bool(np.all(np.abs(np.asarray(a) - np.asarray(b)) < tol))


def _same_quat(a, b, tol=_SAMEFRAME_TOL) -> bool:
    return _same(a, b, tol) or _same(a, -np.asarray(b), tol)


class TreeBuilder:
    """Walks worldbody depth-first and fills the body, joint, dof, geom, site, camera and light
    arrays of ``ctx.fields``."""

    def __init__(self, ctx: Context, meshes: dict, hfields: dict):
        self.ctx = ctx
        self.meshes = meshes  # mesh id -> compiled mesh (mesh.MeshResult)
        self.hfields = hfields  # hfield id -> compiled hfield
        self.body: dict[str, list] = {k: [] for k in (
            "parentid", "pos", "quat", "mocap", "gravcomp", "user", "inertial", "el")}
        self.jnt: list[dict] = []
        self.geom: list[dict] = []
        self.site: list[dict] = []
        self.cam: list[dict] = []
        self.light: list[dict] = []
        self.body_joints: list[list[int]] = []
        self.body_geoms: list[list[int]] = []
        self.body_sites: list[int] = []

    # -- traversal --------------------------------------------------------------------------
    def run(self, worlds: list[Element]) -> None:
        """Adds the world body, then every <worldbody> section's contents in order."""
        self._add_body(None, -1, None, None)
        for world in worlds:
            self._fill(world, 0, _Local())
        # Several <worldbody> sections all add to body 0, so objects are numbered by body
        # (stable within a body) only now, once every section has been read.
        for kind, items in (("geom", self.geom), ("site", self.site), ("cam", self.cam),
                            ("light", self.light)):
            items.sort(key=lambda info: info["bodyid"])
            for info in items:
                self.ctx.register(kind, info["el"])
        for g, info in enumerate(self.geom):
            self.body_geoms[info["bodyid"]].append(g)

    def _add_body(self, el: Element | None, parent: int, pos, quat) -> int:
        ctx = self.ctx
        body_id = ctx.register("body", el, name="world" if el is None else None)
        self.body["parentid"].append(max(parent, 0))  # MuJoCo: the world is its own parent
        self.body["pos"].append(np.zeros(3) if pos is None else pos)
        self.body["quat"].append(_IDENTITY.copy() if quat is None else quat)
        self.body["mocap"].append(el is not None and el.get("mocap", "false") == "true")
        self.body["gravcomp"].append(0.0 if el is None else el.get("gravcomp", 0.0))
        self.body["user"].append(None if el is None else el.get("user"))
        self.body["el"].append(el)
        self.body["inertial"].append(None)
        self.body_joints.append([])
        self.body_geoms.append([])
        return body_id

    def _fill(self, el: Element, body_id: int, frame: _Local,
              children_bodies: list | None = None) -> None:
        """Adds the children of a body (or of a frame inside it) in document order. A frame's
        child bodies join its body's list, numbered in document order with the others."""
        own = children_bodies is None
        children_bodies = [] if own else children_bodies
        for child in el.children:
            tag = child.tag
            if tag == "inertial":
                self.body["inertial"][body_id] = child
            elif tag in ("joint", "freejoint"):
                self._joint(child, body_id, frame)
            elif tag == "geom":
                self._geom(child, body_id, frame)
            elif tag == "site":
                self._site(child, body_id, frame)
            elif tag == "camera":
                self._camera(child, body_id, frame)
            elif tag == "light":
                self._light(child, body_id, frame)
            elif tag == "frame":
                local = self._placement(child)
                self._fill(child, body_id, frame.compose(local.pos, local.quat),
                           children_bodies)
            elif tag == "body":
                children_bodies.append((child, frame))
            else:
                raise child.error(f"unsupported: <{tag}> inside <{el.tag}>")
        # Pre-order numbering: a body's own joints/geoms come first, then each child subtree.
        if own:
            for child, child_frame in children_bodies:
                self._child_body(child, body_id, child_frame)

    def _child_body(self, el: Element, parent: int, frame: _Local) -> None:
        local = self._placement(el)
        placed = frame.compose(local.pos, local.quat)
        body_id = self._add_body(el, parent, placed.pos, placed.quat)
        self._fill(el, body_id, _Local())

    def _placement(self, el: Element) -> _Local:
        ctx = self.ctx
        quat = frames.orientation(el, ctx.angle_scale, ctx.euler_seq)
        return _Local(el.vec("pos", (0, 0, 0)), quat)

    # -- joints -----------------------------------------------------------------------------
    def _joint(self, el: Element, body_id: int, frame: _Local) -> None:
        ctx = self.ctx
        if body_id == 0:
            raise el.error("joints cannot be defined in the world body")
        jtype = JointType.FREE if el.tag == "freejoint" else _JOINT_TYPES[el.get("type", "hinge")]
        jnt_id = ctx.register("jnt", el)
        axis = el.vec("axis", (0, 0, 1)) if el.tag == "joint" else np.array([0.0, 0, 1])
        norm = np.linalg.norm(axis)
        if norm < 1e-14:
            raise el.error("attribute 'axis' must have nonzero length")
        axis = axis / norm
        pos = el.vec("pos", (0, 0, 0)) if el.tag == "joint" else np.zeros(3)
        if jtype == JointType.FREE:
            pos, axis = np.zeros(3), np.array([0.0, 0, 1])
        else:
            pos = frame.pos + quat_rotate(frame.quat, pos)
            axis = quat_rotate(frame.quat, axis)
        angular = jtype in (JointType.HINGE, JointType.BALL)
        scale = ctx.angle_scale if angular else 1.0
        is_joint = el.tag == "joint"
        limited = ctx.limited(el, "limited", "range") if is_joint else False
        # MuJoCo 4.0 converts degrees to radians only in the ranges of limited joints.
        jnt_range = el.vec("range", (0, 0)) * (scale if limited else 1.0) if is_joint \
            else np.zeros(2)
        if jtype == JointType.FREE and limited:
            raise el.error("free joints cannot have limits")
        if jtype == JointType.BALL and limited and jnt_range[0] != 0:
            raise el.error("ball joint range[0] must be 0")
        if limited and jtype in (JointType.HINGE, JointType.SLIDE) and \
                not jnt_range[0] < jnt_range[1]:
            raise el.error("attribute 'range' must have range[0] < range[1]")
        actfrclimited = ctx.limited(el, "actuatorfrclimited", "actuatorfrcrange") \
            if is_joint else False
        # Ball and free joints stay unlimited, actuatorfrclimited="true" too (measured on 4.0)
        actfrclimited = actfrclimited and jtype in (JointType.HINGE, JointType.SLIDE)
        get = (lambda a, d: el.get(a, d)) if is_joint else (lambda a, d: d)
        if el.tag == "freejoint" and el.get("align", "auto") == "true":
            # as compiler alignfree="true": the body frame moves onto its inertial frame
            raise el.error("unsupported: freejoint align='true' is not implemented by mjx_lite")
        if get("springyield", 0.0) > 0:
            raise el.error("unsupported: joint springyield (plasticity) is not implemented "
                           "by mjx_lite")
        springdamper = el.vec("springdamper", (0, 0)) if is_joint else np.zeros(2)
        if np.any(springdamper != 0) and not np.all(springdamper > 0):
            raise el.error("when defined, springdamper values must be positive")
        self.jnt.append(dict(
            type=int(jtype), bodyid=body_id, group=el.get("group", 0), limited=limited,
            actfrclimited=actfrclimited, actgravcomp=get("actuatorgravcomp", "false") == "true",
            solref=el.vec("solreflimit", _SOLREF) if is_joint else np.array(_SOLREF),
            solimp=el.vec("solimplimit", _SOLIMP) if is_joint else np.array(_SOLIMP),
            solref_fri=el.vec("solreffriction", _SOLREF) if is_joint else np.array(_SOLREF),
            solimp_fri=el.vec("solimpfriction", _SOLIMP) if is_joint else np.array(_SOLIMP),
            pos=pos, axis=axis, range=jnt_range,
            # MuJoCo 4.0: stiffness and damping are polynomials (linear, quadratic, cubic).
            stiffness=el.vec("stiffness", (0, 0, 0)) if is_joint else np.zeros(3),
            damping=el.vec("damping", (0, 0, 0)) if is_joint else np.zeros(3),
            actfrcrange=el.vec("actuatorfrcrange", (0, 0)) if is_joint else np.zeros(2),
            margin=get("margin", 0.0), user=get("user", None),
            ref=get("ref", 0.0) * scale, springref=get("springref", 0.0) * scale,
            armature=get("armature", 0.0),
            frictionloss=get("frictionloss", 0.0), springyield=get("springyield", 0.0),
            springdamper=springdamper,
            align=el.get("align", "auto") if el.tag == "freejoint" else "auto",
        ))
        self.body_joints[body_id].append(jnt_id)

    # -- geoms ------------------------------------------------------------------------------
    def _geom(self, el: Element, body_id: int, frame: _Local) -> None:
        ctx = self.ctx
        gtype = _GEOM_TYPES[el.get("type", "sphere")]
        if gtype == GeomType.SDF:
            raise el.error("unsupported: sdf geoms are not implemented by mjx_lite")
        size = el.vec("size", (0, 0, 0))
        pos = el.vec("pos", (0, 0, 0))
        quat = frames.orientation(el, ctx.angle_scale, ctx.euler_seq)
        if el.has("fromto"):
            if gtype not in _FROMTO_TYPES:
                raise el.error("attribute 'fromto' is only for capsule, cylinder, box and "
                               "ellipsoid geoms")
            pos, quat, half = frames.fromto_frame(el.get("fromto"))
            if gtype in (GeomType.CAPSULE, GeomType.CYLINDER):
                size[1] = half
            else:
                size[1] = size[0]
                size[2] = half
        dataid = -1
        mesh = None
        if el.has("mesh"):
            dataid = ctx.lookup("mesh", el.get("mesh"), el, "mesh")
            mesh = self.meshes[dataid]
            if gtype != GeomType.MESH:
                fitted, offset, fit_quat = mesh_module.fit_primitive(
                    mesh, int(gtype), el.get("fitscale", 1.0),
                    self.ctx.spec.compiler("fitaabb", "false") == "true")
                size = np.asarray(fitted, dtype=float)
                pos = pos + quat_rotate(quat, offset)
                quat = quat_mul(quat, fit_quat)
                mesh_for_geom, dataid = None, -1
            else:
                mesh_for_geom = mesh
        else:
            mesh_for_geom = None
            if gtype == GeomType.MESH:
                raise el.error("mesh geom requires attribute 'mesh'")
        if gtype == GeomType.MESH and mesh_for_geom is not None:
            # MuJoCo moves the geom frame onto the mesh's inertial frame.
            pos = pos + quat_rotate(quat, mesh_for_geom.pos)
            quat = quat_mul(quat, mesh_for_geom.quat)
        if gtype == GeomType.HFIELD:
            if not el.has("hfield"):
                raise el.error("hfield geom requires attribute 'hfield'")
            dataid = ctx.lookup("hfield", el.get("hfield"), el, "hfield")
            size = hfield.hfield_geom_size(self.hfields[dataid].size)
        count = _SIZE_COUNT[gtype]
        if gtype not in (GeomType.PLANE, GeomType.HFIELD, GeomType.MESH) and mesh is None:
            if not np.all(size[:count] > 0):
                raise el.error(f"attribute 'size' must have {count} positive value(s) for "
                               f"{el.get('type', 'sphere')} geoms")
        if gtype == GeomType.PLANE and not size[2] > 0:
            raise el.error("plane size[2] (the grid spacing) must be positive")
        mass_given, density = el.get("mass"), el.get("density", 1000.0)
        if (mass_given is not None and mass_given < 0) or density < 0:
            raise el.error("geom mass and density must not be negative")
        if gtype == GeomType.MESH and mesh_for_geom is not None:
            size = mesh_module.mesh_geom_size(mesh_for_geom)
        placed = frame.compose(pos, quat)
        fluid = np.zeros(12)
        if el.get("fluidshape", "none") == "ellipsoid":
            fluid[0] = 1.0
            fluid[1:6] = el.vec("fluidcoef", (0.5, 0.25, 1.5, 1.0, 1.0))
            fluid[6:] = _added_mass(semiaxes(int(gtype), np.asarray(size, float), np))
        self.geom.append(dict(
            type=int(gtype), contype=el.get("contype", 1), conaffinity=el.get("conaffinity", 1),
            condim=el.get("condim", 3), bodyid=body_id, dataid=dataid,
            matid=self._material(el), group=el.get("group", 0), priority=el.get("priority", 0),
            solmix=el.get("solmix", 1.0), solref=el.vec("solref", _SOLREF),
            solimp=el.vec("solimp", _SOLIMP), size=size, pos=placed.pos, quat=placed.quat,
            friction=el.vec("friction", _FRICTION), margin=el.get("margin", 0.0),
            gap=el.get("gap", 0.0), fluid=fluid, user=el.get("user"),
            rgba=el.vec("rgba", _RGBA), mass=mass_given, density=density,
            shellinertia=el.get("shellinertia", "false") == "true", mesh=mesh_for_geom,
            adhesion=el.get("adhesion", 0.0), surfacevel=el.vec("surfacevel", np.zeros(6)),
            castshadow=el.get("castshadow", "true") == "true", el=el,
        ))
        if el.get("condim", 3) not in (1, 3, 4, 6):
            raise el.error("attribute 'condim' must be 1, 3, 4 or 6")
        # Stored in the Model for interop, but no contact in mjx_lite reads them.
        if el.get("adhesion", 0.0) != 0:
            raise el.error("unsupported: geom adhesion (contact adhesion force) is not "
                           "implemented by mjx_lite")
        if np.any(el.vec("surfacevel", np.zeros(6)) != 0):
            raise el.error("unsupported: geom surfacevel (moving contact surfaces) is not "
                           "implemented by mjx_lite")

    def _material(self, el: Element) -> int:
        if not el.has("material"):
            return -1
        return self.ctx.lookup("mat", el.get("material"), el, "material")

    # -- sites, cameras, lights -------------------------------------------------------------
    def _site(self, el: Element, body_id: int, frame: _Local) -> None:
        ctx = self.ctx
        stype = _GEOM_TYPES[el.get("type", "sphere")]
        size = el.vec("size", (0.005, 0.005, 0.005))
        dataid = -1
        if el.has("mesh") != (stype == GeomType.MESH):
            raise el.error("mesh sites need attribute 'mesh', and only mesh sites take it")
        if stype == GeomType.MESH:
            # Sized like a mesh geom, but the site frame stays where it was written (4.0)
            dataid = ctx.lookup("mesh", el.get("mesh"), el, "mesh")
            size = np.array(mesh_module.mesh_geom_size(self.meshes[dataid]), dtype=float)
        if not np.all(size[: max(_SIZE_COUNT[stype], 1)] > 0):
            raise el.error("site size must be positive")
        pos = el.vec("pos", (0, 0, 0))
        quat = frames.orientation(el, ctx.angle_scale, ctx.euler_seq)
        if el.has("fromto"):
            pos, quat, half = frames.fromto_frame(el.get("fromto"))
            if stype in (GeomType.CAPSULE, GeomType.CYLINDER):
                size[1] = half
            else:
                size[1], size[2] = size[0], half
        placed = frame.compose(pos, quat)
        self.site.append(dict(type=int(stype), bodyid=body_id, matid=self._material(el),
                              dataid=dataid,
                              group=el.get("group", 0), size=size, pos=placed.pos,
                              quat=placed.quat, user=el.get("user"), rgba=el.vec("rgba", _RGBA),
                              el=el))

    def _camera(self, el: Element, body_id: int, frame: _Local) -> None:
        local = self._placement(el)
        placed = frame.compose(local.pos, local.quat)
        self.cam.append(dict(
            el=el, mode=_CAM_MODES[el.get("mode", "fixed")], bodyid=body_id,
            target=el.get("target"), pos=placed.pos, quat=placed.quat,
            fovy=el.get("fovy", 45.0), ipd=el.get("ipd", 0.068),
            resolution=np.asarray(el.get("resolution", np.array([1, 1]))),
            user=el.get("user"),
            projection=1 if el.get("projection", "perspective") == "orthographic" else 0,
        ))

    def _light(self, el: Element, body_id: int, frame: _Local) -> None:
        pos = frame.pos + quat_rotate(frame.quat, el.vec("pos", (0, 0, 0)))
        direction = quat_rotate(frame.quat, el.vec("dir", (0, 0, -1)))
        norm = np.linalg.norm(direction)
        ltype = el.get("type", "directional" if el.get("directional", "false") == "true"
                       else "spot")
        self.light.append(dict(
            el=el, mode=_CAM_MODES[el.get("mode", "fixed")], bodyid=body_id,
            target=el.get("target"), pos=pos, dir=direction / max(norm, _MINVAL),
            type={"spot": 0, "directional": 1, "point": 2, "image": 3}[ltype],
            castshadow=el.get("castshadow", "true") == "true",
            active=el.get("active", "true") == "true",
            bulbradius=el.get("bulbradius", 0.02), intensity=el.get("intensity", 0.0),
            softness=el.get("softness", 0.2),
            range=el.get("range", 10.0), attenuation=el.vec("attenuation", (1, 0, 0)),
            cutoff=el.get("cutoff", 45.0), exponent=el.get("exponent", 10.0),
            ambient=el.vec("ambient", (0, 0, 0)), diffuse=el.vec("diffuse", (0.7, 0.7, 0.7)),
            specular=el.vec("specular", (0.3, 0.3, 0.3)),
        ))


def user_array(values: list, el_list: list, nuser: int, what: str) -> np.ndarray:
    """Stacks user arrays; nuser = -1 infers the longest (seed F0:600, size/nuser_*)."""
    lengths = [0 if v is None else len(np.atleast_1d(v)) for v in values]
    width = max(lengths, default=0) if nuser < 0 else nuser
    out = np.zeros((len(values), width))
    for i, v in enumerate(values):
        if v is None:
            continue
        v = np.atleast_1d(v)
        if len(v) > width:
            raise el_list[i].error(f"attribute 'user' has {len(v)} values, more than "
                                   f"nuser_{what} = {width}")
        out[i, : len(v)] = v
    return out


# -- arrays from the collected elements -----------------------------------------------------
def joint_dof_fields(tb: TreeBuilder) -> dict:
    """jnt_*, dof_*, qpos0/qpos_spring and the body joint/dof addresses (tree order)."""
    ctx = tb.ctx
    nbody = len(tb.body["parentid"])
    f: dict = {}
    jnt = tb.jnt
    qposadr, dofadr, qpos0, qpos_spring = [], [], [], []
    dof_bodyid, dof_jntid = [], []
    nq = nv = 0
    for j, info in enumerate(jnt):
        jtype = JointType(info["type"])
        qposadr.append(nq)
        dofadr.append(nv)
        if jtype == JointType.FREE:
            body = info["bodyid"]
            q0 = np.concatenate([tb.xpos0[body], tb.xquat0[body]])
            qpos0.extend(q0)
            qpos_spring.extend(q0)
        elif jtype == JointType.BALL:
            qpos0.extend(_IDENTITY)
            qpos_spring.extend(_IDENTITY)
        else:
            qpos0.append(info["ref"])
            qpos_spring.append(info["springref"])
        nq += jtype.qpos_width()
        for _ in range(jtype.dof_width()):
            dof_bodyid.append(info["bodyid"])
            dof_jntid.append(j)
        nv += jtype.dof_width()
    f.update(nq=nq, nv=nv, njnt=len(jnt), qpos0=np.array(qpos0, dtype=float),
             qpos_spring=np.array(qpos_spring, dtype=float))

    def col(key, shape=None, dtype=float):
        arr = np.array([info[key] for info in jnt], dtype=dtype)
        return arr.reshape((len(jnt),) + shape) if shape is not None else arr

    f["jnt_type"] = col("type", dtype=np.int32)
    f["jnt_qposadr"] = np.array(qposadr, dtype=np.int32)
    f["jnt_dofadr"] = np.array(dofadr, dtype=np.int32)
    f["jnt_bodyid"] = col("bodyid", dtype=np.int32)
    f["jnt_group"] = col("group", dtype=np.int32)
    f["jnt_limited"] = col("limited", dtype=bool)
    f["jnt_actfrclimited"] = col("actfrclimited", dtype=bool)
    f["jnt_actgravcomp"] = col("actgravcomp", dtype=bool)
    f["jnt_solref"] = col("solref", (2,))
    f["jnt_solimp"] = col("solimp", (5,))
    f["jnt_pos"] = col("pos", (3,))
    f["jnt_axis"] = col("axis", (3,))
    stiffness = col("stiffness", (3,))
    f["jnt_stiffness"] = stiffness[:, 0]
    f["jnt_stiffnesspoly"] = stiffness[:, 1:]
    f["jnt_springyield"] = col("springyield")
    f["jnt_range"] = col("range", (2,))
    f["jnt_actfrcrange"] = col("actfrcrange", (2,))
    f["jnt_margin"] = col("margin")
    f["jnt_actuatorid"] = np.full(len(jnt), -1, dtype=np.int32)
    f["jnt_user"] = user_array([i["user"] for i in jnt], ctx.elements.get("jnt", []),
                                tb.nuser["jnt"], "jnt")
    # dofs
    dof_jnt = np.array(dof_jntid, dtype=np.int32)
    per_dof = lambda key: np.array([jnt[j][key] for j in dof_jntid], dtype=float)  # noqa: E731
    f["dof_bodyid"] = np.array(dof_bodyid, dtype=np.int32)
    f["dof_jntid"] = dof_jnt
    f["dof_solref"] = np.array([jnt[j]["solref_fri"] for j in dof_jntid]).reshape(nv, 2)
    f["dof_solimp"] = np.array([jnt[j]["solimp_fri"] for j in dof_jntid]).reshape(nv, 5)
    f["dof_frictionloss"] = per_dof("frictionloss")
    f["dof_armature"] = per_dof("armature")
    damping = np.array([jnt[j]["damping"] for j in dof_jntid]).reshape(nv, 3)
    f["dof_damping"] = damping[:, 0]
    f["dof_dampingpoly"] = damping[:, 1:]
    # body joint / dof addresses
    body_jntnum = np.array([len(tb.body_joints[b]) for b in range(nbody)], dtype=np.int32)
    body_jntadr = np.array([tb.body_joints[b][0] if tb.body_joints[b] else -1
                            for b in range(nbody)], dtype=np.int32)
    body_dofnum = np.zeros(nbody, dtype=np.int32)
    for b in dof_bodyid:
        body_dofnum[b] += 1
    body_dofadr = np.full(nbody, -1, dtype=np.int32)
    for i, b in reversed(list(enumerate(dof_bodyid))):
        body_dofadr[b] = i
    f.update(body_jntnum=body_jntnum, body_jntadr=body_jntadr, body_dofnum=body_dofnum,
             body_dofadr=body_dofadr)
    return f


def tree_fields(tb: TreeBuilder, f: dict) -> dict:
    """Parent/root/weld/tree ids, dof parents, M addresses and the simple-body flags."""
    parent = np.array(tb.body["parentid"], dtype=np.int32)
    nbody = len(parent)
    nv = f["nv"]
    rootid = np.zeros(nbody, dtype=np.int32)
    weldid = np.zeros(nbody, dtype=np.int32)
    mocap = np.array(tb.body["mocap"], dtype=bool)
    for b in range(1, nbody):
        rootid[b] = b if parent[b] == 0 else rootid[parent[b]]
        # Mocap bodies move on their own, so MuJoCo welds them to themselves.
        weldid[b] = b if f["body_jntnum"][b] > 0 or mocap[b] else weldid[parent[b]]
    # Last dof of each body's nearest ancestor chain, for dof_parentid.
    last_dof = np.full(nbody, -1, dtype=np.int32)
    dof_parentid = np.full(nv, -1, dtype=np.int32)
    for b in range(1, nbody):
        prev = last_dof[parent[b]]
        for k in range(f["body_dofnum"][b]):
            d = f["body_dofadr"][b] + k
            dof_parentid[d] = prev
            prev = d
        last_dof[b] = prev
    # Trees: a body with dofs and no moving ancestor starts a kinematic tree.
    treeid = np.full(nbody, -1, dtype=np.int32)
    tree_roots = []
    for b in range(1, nbody):
        if treeid[parent[b]] >= 0:
            treeid[b] = treeid[parent[b]]
        elif f["body_dofnum"][b] > 0:
            tree_roots.append(b)
            treeid[b] = len(tree_roots) - 1
    dof_treeid = treeid[f["dof_bodyid"]].astype(np.int32)
    ntree = len(tree_roots)
    tree_bodyadr = np.array(tree_roots, dtype=np.int32)
    tree_bodynum = np.array([(treeid == t).sum() for t in range(ntree)], dtype=np.int32)
    tree_dofadr = np.array([np.argmax(dof_treeid == t) for t in range(ntree)], dtype=np.int32)
    tree_dofnum = np.array([(dof_treeid == t).sum() for t in range(ntree)], dtype=np.int32)
    # Joint-space inertia rows hold each dof's ancestors and itself.
    chain = np.zeros(nv, dtype=np.int32)
    for d in range(nv):
        chain[d] = 1 + (chain[dof_parentid[d]] if dof_parentid[d] >= 0 else 0)
    dof_madr = np.concatenate([[0], np.cumsum(chain)[:-1]]).astype(np.int32) if nv else \
        np.zeros(0, dtype=np.int32)
    return dict(
        nbody=nbody, body_parentid=parent, body_rootid=rootid, body_weldid=weldid,
        body_treeid=treeid, dof_parentid=dof_parentid, dof_treeid=dof_treeid, ntree=ntree,
        tree_bodyadr=tree_bodyadr, tree_bodynum=tree_bodynum, tree_dofadr=tree_dofadr,
        tree_dofnum=tree_dofnum, dof_Madr=dof_madr, nM=int(chain.sum()),
    )


def world_poses(tb: TreeBuilder) -> None:
    """Body world poses at qpos0: joints apply no motion there, so poses compose body frames."""
    n = len(tb.body["parentid"])
    tb.xpos0 = np.zeros((n, 3))
    tb.xquat0 = np.tile(_IDENTITY, (n, 1))
    for b in range(1, n):
        p = tb.body["parentid"][b]
        tb.xpos0[b] = tb.xpos0[p] + quat_rotate(tb.xquat0[p], tb.body["pos"][b])
        q = quat_mul(tb.xquat0[p], tb.body["quat"][b])
        tb.xquat0[b] = q / np.linalg.norm(q)


def _geom_bounds(info: dict) -> tuple[float, np.ndarray]:
    """Bounding-sphere radius and axis-aligned box (centre, half sizes) in the geom frame."""
    gtype, s = info["type"], info["size"]
    if gtype == GeomType.PLANE:
        return 0.0, np.array([0, 0, -5e9, 1e10, 1e10, 5e9])
    if gtype == GeomType.SPHERE:
        return s[0], np.array([0, 0, 0, s[0], s[0], s[0]])
    if gtype == GeomType.CAPSULE:
        return s[0] + s[1], np.array([0, 0, 0, s[0], s[0], s[0] + s[1]])
    if gtype == GeomType.ELLIPSOID:
        return max(s), np.array([0, 0, 0, s[0], s[1], s[2]])
    if gtype == GeomType.CYLINDER:
        return float(np.hypot(s[0], s[1])), np.array([0, 0, 0, s[0], s[0], s[1]])
    if gtype == GeomType.BOX:
        return float(np.linalg.norm(s)), np.array([0, 0, 0, s[0], s[1], s[2]])
    if gtype == GeomType.HFIELD:
        aabb = hfield.hfield_geom_aabb(info["hfield_size"])
        return float(np.linalg.norm(np.abs(aabb[:3]) + aabb[3:])), aabb
    aabb = mesh_module.mesh_geom_aabb(info["mesh"])
    return float(np.linalg.norm(mesh_module.mesh_geom_size(info["mesh"]))), aabb


def geom_mass_inertia(info: dict) -> tuple[float, np.ndarray]:
    """Mass and principal inertia of one geom from its density or mass (seed F0:1007-1012)."""
    gtype, size = info["type"], info["size"]
    el = info["el"]
    if gtype == GeomType.MESH:
        return mesh_module.mesh_geom_mass_inertia(info["mesh"], info["density"], info["mass"],
                                                  info["shellinertia"], el.where())
    if gtype in (GeomType.PLANE, GeomType.HFIELD):
        return 0.0, np.zeros(3)
    if info["shellinertia"]:
        shell = inertia.primitive_shell(gtype, size)
        if shell is None:
            raise el.error("unsupported: shellinertia for this geom type")
        measure, unit = shell
    else:
        measure = inertia.primitive_volume(gtype, size)
        unit = inertia.primitive_unit_inertia(gtype, size)
    density = info["density"] if info["mass"] is None else info["mass"] / max(measure, _MINVAL)
    return density * measure, density * unit


def body_inertia(tb: TreeBuilder, f: dict, spec: Spec) -> dict:
    """body_mass/inertia/ipos/iquat from <inertial> or from geoms (seed F0:572-577, 870-881)."""
    nbody = f["nbody"]
    mode = spec.compiler("inertiafromgeom", "auto")
    group_range = spec.compiler("inertiagrouprange", np.array([0, 5]))
    mass = np.zeros(nbody)
    inert = np.zeros((nbody, 3))
    ipos = np.zeros((nbody, 3))
    iquat = np.tile(_IDENTITY, (nbody, 1))
    ctx = tb.ctx
    for b in range(1, nbody):
        el_inertial = tb.body["inertial"][b]
        if el_inertial is not None and mode != "true":
            pos = el_inertial.vec("pos", (0, 0, 0))
            quat = frames.orientation(el_inertial, ctx.angle_scale, ctx.euler_seq)
            m = el_inertial.get("mass")
            if el_inertial.has("fullinertia"):
                if el_inertial.has("diaginertia") or any(
                        el_inertial.explicit(a) for a in frames.ORIENTATIONS):
                    raise el_inertial.error("fullinertia cannot be combined with diaginertia "
                                            "or an orientation")
                full = inertia.full_inertia_matrix(el_inertial.get("fullinertia"))
                if np.any(np.linalg.eigvalsh(full) <= 0):
                    raise el_inertial.error("fullinertia is not positive definite")
                values, quat = inertia.principal(full)
                diag = values
            elif el_inertial.has("diaginertia"):
                diag = el_inertial.get("diaginertia")
            else:
                raise el_inertial.error("inertial requires diaginertia or fullinertia")
            mass[b], inert[b], ipos[b], iquat[b] = m, diag, pos, quat
            continue
        if mode == "false":
            continue
        geoms = [g for g in tb.body_geoms[b]
                 if group_range[0] <= tb.geom[g]["group"] <= group_range[1]]
        infos = [tb.geom[g] for g in geoms]
        mi = [geom_mass_inertia(i) for i in infos]
        if not infos:
            continue
        if len(infos) == 1:
            mass[b], inert[b] = mi[0]
            ipos[b], iquat[b] = infos[0]["pos"], infos[0]["quat"]
            continue
        total, com, tensor = inertia.combine([x[0] for x in mi], [x[1] for x in mi],
                                             [i["pos"] for i in infos], [i["quat"] for i in infos])
        mass[b], ipos[b] = total, com
        if total > _MINVAL:
            inert[b], iquat[b] = inertia.principal(tensor)
    for b in range(1, nbody):
        if mass[b] == 0 and (tb.body["inertial"][b] is None or mode == "true"):
            # A body without mass of its own: MuJoCo 4.0 leaves its inertial frame at the
            # body's own pos/orientation as written (before any enclosing frame), so xipos is
            # not the body origin (measured: body_ipos, body_iquat, sameframe, simple).
            el = tb.body["el"][b]
            ipos[b] = el.vec("pos", (0, 0, 0))
            iquat[b] = frames.orientation(el, ctx.angle_scale, ctx.euler_seq)
    boundmass = spec.compiler("boundmass", 0.0)
    boundinertia = spec.compiler("boundinertia", 0.0)
    balance = spec.compiler("balanceinertia", "false") == "true"
    for b in range(1, nbody):
        mass[b] = max(mass[b], boundmass)
        inert[b] = np.maximum(inert[b], boundinertia)
        i = inert[b]
        if i[0] + i[1] < i[2] or i[0] + i[2] < i[1] or i[1] + i[2] < i[0]:
            if balance:
                inert[b] = np.full(3, i.mean())
            else:
                el = tb.body["el"][b]
                raise el.error("inertia must satisfy A + B >= C; use balanceinertia to fix")
    total_target = spec.compiler("settotalmass", -1.0)
    if total_target > 0:
        scale = total_target / mass[1:].sum()
        mass[1:] *= scale
        inert[1:] *= scale
    _check_moving_mass(tb, f, mass, inert, ipos, iquat)
    return dict(body_mass=mass, body_inertia=inert, body_ipos=ipos, body_iquat=iquat)


def _check_moving_mass(tb: TreeBuilder, f: dict, mass, inert, ipos, iquat) -> None:
    """Each body with joints, with the bodies welded to it, needs mass and a positive-definite
    inertia, or M is singular (MuJoCo rejects such models the same way)."""
    for b in range(1, f["nbody"]):
        if f["body_jntnum"][b] == 0:
            continue
        group = [c for c in range(1, f["nbody"]) if f["body_weldid"][c] == b]
        pos = [tb.xpos0[c] + quat_rotate(tb.xquat0[c], ipos[c]) for c in group]
        quat = [quat_mul(tb.xquat0[c], iquat[c]) for c in group]
        total, _, tensor = inertia.combine(mass[group], inert[group], pos, quat)
        if total < _MINVAL or np.linalg.eigvalsh(tensor).min() < _MINVAL:
            raise tb.body["el"][b].error("mass and inertia of moving bodies must be larger "
                                         "than 1e-15")


def geom_fields(tb: TreeBuilder, nbody: int) -> dict:
    g = tb.geom
    n = len(g)
    col = lambda k, dtype=float, shape=(): np.array([i[k] for i in g], dtype=dtype).reshape(  # noqa: E731
        (n,) + shape)
    bounds = [_geom_bounds(i) for i in g]
    f = dict(
        ngeom=n, geom_type=col("type", np.int32), geom_contype=col("contype", np.int32),
        geom_conaffinity=col("conaffinity", np.int32), geom_condim=col("condim", np.int32),
        geom_bodyid=col("bodyid", np.int32), geom_dataid=col("dataid", np.int32),
        geom_matid=col("matid", np.int32), geom_group=col("group", np.int32),
        geom_priority=col("priority", np.int32), geom_solmix=col("solmix"),
        geom_solref=col("solref", float, (2,)), geom_solimp=col("solimp", float, (5,)),
        geom_size=col("size", float, (3,)), geom_pos=col("pos", float, (3,)),
        geom_quat=col("quat", float, (4,)), geom_friction=col("friction", float, (3,)),
        geom_margin=col("margin"), geom_gap=col("gap"), geom_fluid=col("fluid", float, (12,)),
        geom_rgba=col("rgba", np.float32, (4,)), geom_adhesion=col("adhesion"),
        geom_surfacevel=col("surfacevel", float, (6,)), geom_castshadow=col("castshadow", bool),
        geom_rbound=np.array([b[0] for b in bounds], dtype=float).reshape(n),
        geom_aabb=np.array([b[1] for b in bounds], dtype=float).reshape(n, 6),
        geom_user=user_array([i["user"] for i in g], tb.ctx.elements.get("geom", []),
                              tb.nuser["geom"], "geom"),
    )
    geomnum = np.zeros(nbody, dtype=np.int32)
    geomadr = np.full(nbody, -1, dtype=np.int32)
    for gid, info in enumerate(g):
        b = info["bodyid"]
        if geomnum[b] == 0:
            geomadr[b] = gid
        geomnum[b] += 1
    f.update(body_geomnum=geomnum, body_geomadr=geomadr)
    contype = np.zeros(nbody, dtype=np.int32)
    conaff = np.zeros(nbody, dtype=np.int32)
    margin = np.zeros(nbody)
    for info in g:
        b = info["bodyid"]
        contype[b] |= info["contype"]
        conaff[b] |= info["conaffinity"]
        margin[b] = max(margin[b], info["margin"] + info["gap"])  # MuJoCo: margin + gap
    f.update(body_contype=contype, body_conaffinity=conaff, body_margin=margin)
    return f


def _added_mass(s: np.ndarray) -> np.ndarray:
    """Virtual (added) mass and inertia per unit fluid density of an ellipsoid in potential
    flow (geom_fluid[6:12], the fluid model's added-mass terms), from Lamb's coefficients
    alpha_i = abc * int_0^inf dl / ((s_i^2 + l) sqrt(prod_j (s_j^2 + l))) in closed form
    (Carlson's R_D). MuJoCo 4.0 evaluates the integral by quadrature: its values differ from
    these by up to ~2e-6 relative."""
    from scipy.special import elliprd

    if np.any(s <= 0):
        return np.zeros(6)
    volume = 4.0 / 3.0 * np.pi * np.prod(s)
    sq = s * s
    alpha = np.array([2.0 / 3.0 * np.prod(s) * elliprd(sq[(i + 1) % 3], sq[(i + 2) % 3],
                                                         sq[i]) for i in range(3)])
    mass = volume * alpha / (2.0 - alpha)
    inertia = np.zeros(3)
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        diff = sq[j] - sq[k]
        den = 2.0 * diff + (sq[j] + sq[k]) * (alpha[j] - alpha[k])
        if diff != 0 and den != 0:
            inertia[i] = volume / 5.0 * diff * diff * (alpha[k] - alpha[j]) / den
    return np.concatenate([mass, inertia])


def _sameframe(pos, quat, ipos, iquat) -> int:
    """How a frame relates to its body (mjtSameFrame; MuJoCo 4.0 checks body first)."""
    if _same(pos, 0) and _same_quat(quat, _IDENTITY):
        return SameFrame.BODY
    if _same_quat(quat, _IDENTITY):
        return SameFrame.BODYROT
    if _same(pos, ipos) and _same_quat(quat, iquat):
        return SameFrame.INERTIA
    if _same_quat(quat, iquat):
        return SameFrame.INERTIAROT
    return SameFrame.NONE
