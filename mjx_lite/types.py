"""Enums with MuJoCo 4.0's integer values, and the Option, Statistic, Model and Data pytrees.

Field names, shapes and element order follow MuJoCo 4.0's ``mjModel``/``mjData`` so that arrays
line up one to one. Differences, all deliberate:
  * 3x3 matrices that MuJoCo stores flat (9) are (..., 3, 3) here: ``cam_mat0``, ``xmat``,
    ``ximat``, ``geom_xmat``, ``site_xmat``, ``cam_xmat``.
  * Names are kept as static tuples per object kind (``Model.names``), not a char buffer.
  * Sparse-structure index arrays (``M_rowadr``, ``mapM2D``, ...), flex, skin, texture, plugin,
    BVH/octree and history/delay fields are not carried (see ``tests/model_fields.txt``).
Static vs traced follows ``dataclasses.PyTreeNode``: float64 parameters are traced ``jax.Array``
leaves (their dtype follows ``jax_enable_x64`` when the model is loaded); integer, boolean and
render-only float32 fields are static host numpy arrays.
"""

from __future__ import annotations

import enum

import jax
import numpy as np

from mjx_lite.collision.types import Contact
from mjx_lite.dataclasses import PyTreeNode


class DisableBit(enum.IntFlag):
    """opt.disableflags bits (MuJoCo 4.0: spring/damper replace 3.x's single passive bit)."""

    CONSTRAINT = 1
    EQUALITY = 2
    FRICTIONLOSS = 4
    LIMIT = 8
    CONTACT = 16
    SPRING = 32
    DAMPER = 64
    GRAVITY = 128
    CLAMPCTRL = 256
    WARMSTART = 512
    FILTERPARENT = 1024
    ACTUATION = 2048
    REFSAFE = 4096
    SENSOR = 8192
    MIDPHASE = 16384
    EULERDAMP = 32768
    AUTORESET = 65536
    NATIVECCD = 131072
    ISLAND = 262144
    MULTICCD = 524288


class EnableBit(enum.IntFlag):
    """opt.enableflags bits (MuJoCo 4.0)."""

    OVERRIDE = 1
    ENERGY = 2
    FWDINV = 4
    INVDISCRETE = 8
    SLEEP = 16
    DIAGEXACT = 32
    IPC = 64
    SPECULATIVE = 128


class IntegratorType(enum.IntEnum):
    EULER = 0
    RK4 = 1
    IMPLICIT = 2
    IMPLICITFAST = 3
    DISCRETE = 4  # new in 4.0


class ConeType(enum.IntEnum):
    PYRAMIDAL = 0
    ELLIPTIC = 1


class SolverType(enum.IntEnum):
    PGS = 0
    CG = 1
    NEWTON = 2


class JacobianType(enum.IntEnum):
    DENSE = 0
    SPARSE = 1
    AUTO = 2


class JointType(enum.IntEnum):
    FREE = 0
    BALL = 1
    SLIDE = 2
    HINGE = 3

    def qpos_width(self) -> int:
        return (7, 4, 1, 1)[self]

    def dof_width(self) -> int:
        return (6, 3, 1, 1)[self]


class GeomType(enum.IntEnum):
    PLANE = 0
    HFIELD = 1
    SPHERE = 2
    CAPSULE = 3
    ELLIPSOID = 4
    CYLINDER = 5
    BOX = 6
    MESH = 7
    SDF = 8


class TrnType(enum.IntEnum):
    JOINT = 0
    JOINTINPARENT = 1
    SLIDERCRANK = 2
    TENDON = 3
    SITE = 4
    BODY = 5
    SO3 = 6  # new in 4.0
    UNDEFINED = 1000


class DynType(enum.IntEnum):
    NONE = 0
    INTEGRATOR = 1
    FILTER = 2
    FILTEREXACT = 3
    MUSCLE = 4
    DCMOTOR = 5  # new in 4.0
    PID = 6  # new in 4.0
    USER = 7


class GainType(enum.IntEnum):
    FIXED = 0
    AFFINE = 1
    MUSCLE = 2
    DCMOTOR = 3  # new in 4.0
    SO3 = 4  # new in 4.0
    PID = 5  # new in 4.0
    USER = 6


class BiasType(enum.IntEnum):
    NONE = 0
    AFFINE = 1
    MUSCLE = 2
    DCMOTOR = 3  # new in 4.0
    SO3 = 4  # new in 4.0
    USER = 5


class EqType(enum.IntEnum):
    CONNECT = 0
    WELD = 1
    JOINT = 2
    TENDON = 3
    FLEX = 4
    FLEXVERT = 5
    FLEXSTRAIN = 6
    DISTANCE = 7


class WrapType(enum.IntEnum):
    NONE = 0
    JOINT = 1
    PULLEY = 2
    SITE = 3
    SPHERE = 4
    CYLINDER = 5


class SensorType(enum.IntEnum):
    TOUCH = 0
    ACCELEROMETER = 1
    VELOCIMETER = 2
    GYRO = 3
    FORCE = 4
    TORQUE = 5
    MAGNETOMETER = 6
    RANGEFINDER = 7
    CAMPROJECTION = 8
    JOINTPOS = 9
    JOINTVEL = 10
    TENDONPOS = 11
    TENDONVEL = 12
    ACTUATORPOS = 13
    ACTUATORVEL = 14
    ACTUATORFRC = 15
    JOINTACTFRC = 16
    TENDONACTFRC = 17
    BALLQUAT = 18
    BALLANGVEL = 19
    JOINTLIMITPOS = 20
    JOINTLIMITVEL = 21
    JOINTLIMITFRC = 22
    TENDONLIMITPOS = 23
    TENDONLIMITVEL = 24
    TENDONLIMITFRC = 25
    FRAMEPOS = 26
    FRAMEQUAT = 27
    FRAMEXAXIS = 28
    FRAMEYAXIS = 29
    FRAMEZAXIS = 30
    FRAMELINVEL = 31
    FRAMEANGVEL = 32
    FRAMELINACC = 33
    FRAMEANGACC = 34
    SUBTREECOM = 35
    SUBTREELINVEL = 36
    SUBTREEANGMOM = 37
    INSIDESITE = 38
    GEOMDIST = 39
    GEOMNORMAL = 40
    GEOMFROMTO = 41
    CONTACT = 42
    E_POTENTIAL = 43
    E_KINETIC = 44
    CLOCK = 45
    TACTILE = 46
    PLUGIN = 47
    USER = 48


NISLAND = 20  # mjNISLAND: islands whose solver statistics mjData keeps


class ObjType(enum.IntEnum):
    UNKNOWN = 0
    BODY = 1
    XBODY = 2
    JOINT = 3
    DOF = 4
    GEOM = 5
    SITE = 6
    CAMERA = 7
    LIGHT = 8
    FLEX = 9
    MESH = 10
    SKIN = 11
    HFIELD = 12
    TEXTURE = 13
    MATERIAL = 14
    PAIR = 15
    EXCLUDE = 16
    EQUALITY = 17
    TENDON = 18
    ACTUATOR = 19
    SENSOR = 20
    NUMERIC = 21
    TEXT = 22
    TUPLE = 23
    KEY = 24
    PLUGIN = 25


class Stage(enum.IntEnum):
    NONE = 0
    POS = 1
    VEL = 2
    ACC = 3


class DataType(enum.IntEnum):
    REAL = 0
    POSITIVE = 1
    AXIS = 2
    QUATERNION = 3


class CamLightType(enum.IntEnum):
    FIXED = 0
    TRACK = 1
    TRACKCOM = 2
    TARGETBODY = 3
    TARGETBODYCOM = 4


class SameFrame(enum.IntEnum):
    NONE = 0
    BODY = 1
    INERTIA = 2
    BODYROT = 3
    INERTIAROT = 4


class Option(PyTreeNode):
    """Physics options (mjOption). Fields that change the traced program are static."""

    timestep: jax.Array
    impratio: jax.Array
    tolerance: jax.Array
    ls_tolerance: jax.Array
    noslip_tolerance: jax.Array
    ccd_tolerance: jax.Array
    sleep_tolerance: jax.Array
    gravity: jax.Array  # (3,)
    wind: jax.Array  # (3,)
    magnetic: jax.Array  # (3,)
    density: jax.Array
    viscosity: jax.Array
    o_margin: jax.Array
    o_solref: jax.Array  # (2,)
    o_solimp: jax.Array  # (5,)
    o_friction: jax.Array  # (5,)
    integrator: IntegratorType
    cone: ConeType
    jacobian: JacobianType
    solver: SolverType
    iterations: int
    ls_iterations: int
    noslip_iterations: int
    ccd_iterations: int
    disableflags: int
    enableflags: int
    disableactuator: int
    sdf_initpoints: int
    sdf_iterations: int


class Statistic(PyTreeNode):
    """Model statistics (mjStatistic); meaninertia scales the solver's tolerance.

    ``meansize``, ``extent`` and ``center`` (heuristics used to place the free camera and scale
    decorations) are not carried."""

    meaninertia: jax.Array
    meanmass: jax.Array


class Model(PyTreeNode):
    """The compiled model (mjModel). Shapes in MuJoCo size names; dtype as MuJoCo stores it."""

    # sizes
    nq: int
    nv: int
    nu: int
    na: int
    nbody: int
    njnt: int
    ngeom: int
    nsite: int
    ncam: int
    nlight: int
    nmesh: int
    nmeshvert: int
    nmeshface: int
    nmeshgraph: int
    nhfield: int
    nhfielddata: int
    nmat: int
    npair: int
    nexclude: int
    neq: int
    ntendon: int
    nwrap: int
    nsensor: int
    nnumeric: int
    ntext: int
    nkey: int
    nmocap: int
    nM: int
    nsensordata: int
    nuserdata: int
    ntree: int
    ngravcomp: int
    nuser_body: int
    nuser_jnt: int
    nuser_geom: int
    nuser_site: int
    nuser_cam: int
    nuser_tendon: int
    nuser_actuator: int
    nuser_sensor: int
    nconmax: int
    njmax: int
    opt: Option
    stat: Statistic
    qpos0: jax.Array  # (nq) float64
    qpos_spring: jax.Array  # (nq) float64
    body_conaffinity: np.ndarray  # (nbody) int32
    body_contype: np.ndarray  # (nbody) int32
    body_dofadr: np.ndarray  # (nbody) int32
    body_dofnum: np.ndarray  # (nbody) int32
    body_geomadr: np.ndarray  # (nbody) int32
    body_geomnum: np.ndarray  # (nbody) int32
    body_gravcomp: jax.Array  # (nbody) float64
    body_inertia: jax.Array  # (nbody, 3) float64
    body_invweight0: jax.Array  # (nbody, 2) float64
    body_ipos: jax.Array  # (nbody, 3) float64
    body_iquat: jax.Array  # (nbody, 4) float64
    body_jntadr: np.ndarray  # (nbody) int32
    body_jntnum: np.ndarray  # (nbody) int32
    body_margin: jax.Array  # (nbody) float64
    body_mass: jax.Array  # (nbody) float64
    body_mocapid: np.ndarray  # (nbody) int32
    body_parentid: np.ndarray  # (nbody) int32
    body_pos: jax.Array  # (nbody, 3) float64
    body_quat: jax.Array  # (nbody, 4) float64
    body_rootid: np.ndarray  # (nbody) int32
    body_sameframe: np.ndarray  # (nbody) uint8
    body_simple: np.ndarray  # (nbody) uint8
    body_subtreemass: jax.Array  # (nbody) float64
    body_treeid: np.ndarray  # (nbody) int32
    body_user: jax.Array  # (nbody, nuser_body) float64
    body_weldid: np.ndarray  # (nbody) int32
    jnt_actfrclimited: np.ndarray  # (njnt) bool
    jnt_actfrcrange: jax.Array  # (njnt, 2) float64
    jnt_actgravcomp: np.ndarray  # (njnt) bool
    jnt_actuatorid: np.ndarray  # (njnt) int32
    jnt_axis: jax.Array  # (njnt, 3) float64
    jnt_bodyid: np.ndarray  # (njnt) int32
    jnt_dofadr: np.ndarray  # (njnt) int32
    jnt_group: np.ndarray  # (njnt) int32
    jnt_limited: np.ndarray  # (njnt) bool
    jnt_margin: jax.Array  # (njnt) float64
    jnt_pos: jax.Array  # (njnt, 3) float64
    jnt_qposadr: np.ndarray  # (njnt) int32
    jnt_range: jax.Array  # (njnt, 2) float64
    jnt_solimp: jax.Array  # (njnt, 5) float64
    jnt_solref: jax.Array  # (njnt, 2) float64
    jnt_springyield: jax.Array  # (njnt) float64
    jnt_stiffness: jax.Array  # (njnt) float64
    jnt_stiffnesspoly: jax.Array  # (njnt, 2) float64
    jnt_type: np.ndarray  # (njnt) int32
    jnt_user: jax.Array  # (njnt, nuser_jnt) float64
    dof_M0: jax.Array  # (nv) float64
    dof_Madr: np.ndarray  # (nv) int32
    dof_armature: jax.Array  # (nv) float64
    dof_bodyid: np.ndarray  # (nv) int32
    dof_damping: jax.Array  # (nv) float64
    dof_dampingpoly: jax.Array  # (nv, 2) float64
    dof_frictionloss: jax.Array  # (nv) float64
    dof_invweight0: jax.Array  # (nv) float64
    dof_jntid: np.ndarray  # (nv) int32
    dof_parentid: np.ndarray  # (nv) int32
    dof_simplenum: np.ndarray  # (nv) int32
    dof_solimp: jax.Array  # (nv, 5) float64
    dof_solref: jax.Array  # (nv, 2) float64
    dof_treeid: np.ndarray  # (nv) int32
    tree_bodyadr: np.ndarray  # (ntree) int32
    tree_bodynum: np.ndarray  # (ntree) int32
    tree_dofadr: np.ndarray  # (ntree) int32
    tree_dofnum: np.ndarray  # (ntree) int32
    geom_aabb: jax.Array  # (ngeom, 6) float64
    geom_adhesion: jax.Array  # (ngeom) float64
    geom_bodyid: np.ndarray  # (ngeom) int32
    geom_castshadow: np.ndarray  # (ngeom) bool
    geom_conaffinity: np.ndarray  # (ngeom) int32
    geom_condim: np.ndarray  # (ngeom) int32
    geom_contype: np.ndarray  # (ngeom) int32
    geom_dataid: np.ndarray  # (ngeom) int32
    geom_fluid: jax.Array  # (ngeom, 12) float64
    geom_friction: jax.Array  # (ngeom, 3) float64
    geom_gap: jax.Array  # (ngeom) float64
    geom_group: np.ndarray  # (ngeom) int32
    geom_margin: jax.Array  # (ngeom) float64
    geom_matid: np.ndarray  # (ngeom) int32
    geom_pos: jax.Array  # (ngeom, 3) float64
    geom_priority: np.ndarray  # (ngeom) int32
    geom_quat: jax.Array  # (ngeom, 4) float64
    geom_rbound: jax.Array  # (ngeom) float64
    geom_rgba: np.ndarray  # (ngeom, 4) float32
    geom_sameframe: np.ndarray  # (ngeom) uint8
    geom_size: jax.Array  # (ngeom, 3) float64
    geom_solimp: jax.Array  # (ngeom, 5) float64
    geom_solmix: jax.Array  # (ngeom) float64
    geom_solref: jax.Array  # (ngeom, 2) float64
    geom_surfacevel: jax.Array  # (ngeom, 6) float64
    geom_type: np.ndarray  # (ngeom) int32
    geom_user: jax.Array  # (ngeom, nuser_geom) float64
    site_bodyid: np.ndarray  # (nsite) int32
    site_dataid: np.ndarray  # (nsite) int32
    site_group: np.ndarray  # (nsite) int32
    site_matid: np.ndarray  # (nsite) int32
    site_pos: jax.Array  # (nsite, 3) float64
    site_quat: jax.Array  # (nsite, 4) float64
    site_rgba: np.ndarray  # (nsite, 4) float32
    site_sameframe: np.ndarray  # (nsite) uint8
    site_size: jax.Array  # (nsite, 3) float64
    site_type: np.ndarray  # (nsite) int32
    site_user: jax.Array  # (nsite, nuser_site) float64
    cam_bodyid: np.ndarray  # (ncam) int32
    cam_fovy: jax.Array  # (ncam) float64
    cam_ipd: jax.Array  # (ncam) float64
    cam_mat0: jax.Array  # (ncam, 3, 3) float64
    cam_mode: np.ndarray  # (ncam) int32
    cam_pos: jax.Array  # (ncam, 3) float64
    cam_pos0: jax.Array  # (ncam, 3) float64
    cam_poscom0: jax.Array  # (ncam, 3) float64
    cam_projection: np.ndarray  # (ncam) int32
    cam_quat: jax.Array  # (ncam, 4) float64
    cam_resolution: np.ndarray  # (ncam, 2) int32
    cam_targetbodyid: np.ndarray  # (ncam) int32
    cam_user: jax.Array  # (ncam, nuser_cam) float64
    light_active: np.ndarray  # (nlight) bool
    light_ambient: np.ndarray  # (nlight, 3) float32
    light_attenuation: np.ndarray  # (nlight, 3) float32
    light_bodyid: np.ndarray  # (nlight) int32
    light_bulbradius: np.ndarray  # (nlight) float32
    light_castshadow: np.ndarray  # (nlight) bool
    light_cutoff: np.ndarray  # (nlight) float32
    light_diffuse: np.ndarray  # (nlight, 3) float32
    light_dir: jax.Array  # (nlight, 3) float64
    light_dir0: jax.Array  # (nlight, 3) float64
    light_exponent: np.ndarray  # (nlight) float32
    light_intensity: np.ndarray  # (nlight) float32
    light_mode: np.ndarray  # (nlight) int32
    light_pos: jax.Array  # (nlight, 3) float64
    light_pos0: jax.Array  # (nlight, 3) float64
    light_poscom0: jax.Array  # (nlight, 3) float64
    light_range: np.ndarray  # (nlight) float32
    light_softness: np.ndarray  # (nlight) float32
    light_specular: np.ndarray  # (nlight, 3) float32
    light_targetbodyid: np.ndarray  # (nlight) int32
    light_type: np.ndarray  # (nlight) int32
    mesh_face: np.ndarray  # (nmeshface, 3) int32
    mesh_faceadr: np.ndarray  # (nmesh) int32
    mesh_facenum: np.ndarray  # (nmesh) int32
    mesh_graph: np.ndarray  # (nmeshgraph) int32 convex hulls (see compiler.mesh.mesh_graph)
    mesh_graphadr: np.ndarray  # (nmesh) int32 address in mesh_graph, -1 without a hull
    mesh_polynum: np.ndarray  # (nmesh) int32 hull polygons (compiler.mesh.mesh_polygons)
    mesh_polyadr: np.ndarray  # (nmesh) int32 first polygon
    mesh_polynormal: np.ndarray  # (nmeshpoly, 3) float64 outward unit normal, mesh frame
    mesh_polyvertadr: np.ndarray  # (nmeshpoly) int32 address in mesh_polyvert
    mesh_polyvertnum: np.ndarray  # (nmeshpoly) int32 corners
    mesh_polyvert: np.ndarray  # (nmeshpolyvert) int32 corner vertex ids (mesh-local)
    mesh_pos: jax.Array  # (nmesh, 3) float64
    mesh_quat: jax.Array  # (nmesh, 4) float64
    mesh_scale: jax.Array  # (nmesh, 3) float64
    mesh_vert: jax.Array  # (nmeshvert, 3) float32
    mesh_vertadr: np.ndarray  # (nmesh) int32
    mesh_vertnum: np.ndarray  # (nmesh) int32
    hfield_adr: np.ndarray  # (nhfield) int32
    hfield_data: jax.Array  # (nhfielddata) float32
    hfield_ncol: np.ndarray  # (nhfield) int32
    hfield_nrow: np.ndarray  # (nhfield) int32
    hfield_size: jax.Array  # (nhfield, 4) float64
    mat_emission: np.ndarray  # (nmat) float32
    mat_metallic: np.ndarray  # (nmat) float32
    mat_reflectance: np.ndarray  # (nmat) float32
    mat_rgba: np.ndarray  # (nmat, 4) float32
    mat_roughness: np.ndarray  # (nmat) float32
    mat_shininess: np.ndarray  # (nmat) float32
    mat_specular: np.ndarray  # (nmat) float32
    pair_adhesion: jax.Array  # (npair) float64
    pair_dim: np.ndarray  # (npair) int32
    pair_friction: jax.Array  # (npair, 5) float64
    pair_gap: jax.Array  # (npair) float64
    pair_geom1: np.ndarray  # (npair) int32
    pair_geom2: np.ndarray  # (npair) int32
    pair_margin: jax.Array  # (npair) float64
    pair_signature: np.ndarray  # (npair) int32
    pair_solimp: jax.Array  # (npair, 5) float64
    pair_solref: jax.Array  # (npair, 2) float64
    pair_solreffriction: jax.Array  # (npair, 2) float64
    exclude_signature: np.ndarray  # (nexclude) int32
    eq_active0: np.ndarray  # (neq) bool
    eq_data: jax.Array  # (neq, 12) float64
    eq_obj1id: np.ndarray  # (neq) int32
    eq_obj2id: np.ndarray  # (neq) int32
    eq_objtype: np.ndarray  # (neq) int32
    eq_solimp: jax.Array  # (neq, 5) float64
    eq_solref: jax.Array  # (neq, 2) float64
    eq_type: np.ndarray  # (neq) int32
    tendon_actfrclimited: np.ndarray  # (ntendon) bool
    tendon_actfrcrange: jax.Array  # (ntendon, 2) float64
    tendon_actuatorid: np.ndarray  # (ntendon) int32
    tendon_adr: np.ndarray  # (ntendon) int32
    tendon_armature: jax.Array  # (ntendon) float64
    tendon_damping: jax.Array  # (ntendon) float64
    tendon_dampingpoly: jax.Array  # (ntendon, 2) float64
    tendon_frictionloss: jax.Array  # (ntendon) float64
    tendon_group: np.ndarray  # (ntendon) int32
    tendon_invweight0: jax.Array  # (ntendon) float64
    tendon_length0: jax.Array  # (ntendon) float64
    tendon_lengthspring: jax.Array  # (ntendon, 2) float64
    tendon_limited: np.ndarray  # (ntendon) bool
    tendon_margin: jax.Array  # (ntendon) float64
    tendon_matid: np.ndarray  # (ntendon) int32
    tendon_num: np.ndarray  # (ntendon) int32
    tendon_range: jax.Array  # (ntendon, 2) float64
    tendon_rgba: np.ndarray  # (ntendon, 4) float32
    tendon_solimp_fri: jax.Array  # (ntendon, 5) float64
    tendon_solimp_lim: jax.Array  # (ntendon, 5) float64
    tendon_solref_fri: jax.Array  # (ntendon, 2) float64
    tendon_solref_lim: jax.Array  # (ntendon, 2) float64
    tendon_springyield: jax.Array  # (ntendon) float64
    tendon_stiffness: jax.Array  # (ntendon) float64
    tendon_stiffnesspoly: jax.Array  # (ntendon, 2) float64
    tendon_treeid: np.ndarray  # (ntendon, 2) int32
    tendon_treenum: np.ndarray  # (ntendon) int32
    tendon_type: np.ndarray  # (ntendon) int32
    tendon_user: jax.Array  # (ntendon, nuser_tendon) float64
    tendon_width: jax.Array  # (ntendon) float64
    wrap_objid: np.ndarray  # (nwrap) int32
    wrap_prm: jax.Array  # (nwrap) float64
    wrap_type: np.ndarray  # (nwrap) int32
    actuator_acc0: jax.Array  # (nu) float64
    actuator_actadr: np.ndarray  # (nu) int32
    actuator_actearly: np.ndarray  # (nu) bool
    actuator_actlimited: np.ndarray  # (nu) bool
    actuator_actnum: np.ndarray  # (nu) int32
    actuator_actrange: jax.Array  # (nu, 2) float64
    actuator_armature: jax.Array  # (nu) float64
    actuator_biasprm: jax.Array  # (nu, 10) float64
    actuator_biastype: np.ndarray  # (nu) int32
    actuator_cranklength: jax.Array  # (nu) float64
    actuator_ctrladr: np.ndarray  # (nu) int32
    actuator_ctrllimited: np.ndarray  # (nu) bool
    actuator_ctrlnum: np.ndarray  # (nu) int32
    actuator_ctrlrange: jax.Array  # (nu, 2) float64
    actuator_ctrlspec: np.ndarray  # (nu) int32
    actuator_damping: jax.Array  # (nu) float64
    actuator_dampingpoly: jax.Array  # (nu, 2) float64
    actuator_delay: jax.Array  # (nu) float64
    actuator_dynprm: jax.Array  # (nu, 10) float64
    actuator_dyntype: np.ndarray  # (nu) int32
    actuator_forcelimited: np.ndarray  # (nu) bool
    actuator_forcerange: jax.Array  # (nu, 2) float64
    actuator_gainprm: jax.Array  # (nu, 10) float64
    actuator_gaintype: np.ndarray  # (nu) int32
    actuator_gear: jax.Array  # (nu, 6) float64
    actuator_group: np.ndarray  # (nu) int32
    actuator_length0: jax.Array  # (nu) float64
    actuator_lengthrange: jax.Array  # (nu, 2) float64
    actuator_outadr: np.ndarray  # (nu) int32
    actuator_outnum: np.ndarray  # (nu) int32
    actuator_trnid: np.ndarray  # (nu, 2) int32
    actuator_trntype: np.ndarray  # (nu) int32
    actuator_user: jax.Array  # (nu, nuser_actuator) float64
    sensor_adr: np.ndarray  # (nsensor) int32
    sensor_cutoff: jax.Array  # (nsensor) float64
    sensor_datatype: np.ndarray  # (nsensor) int32
    sensor_delay: jax.Array  # (nsensor) float64
    sensor_dim: np.ndarray  # (nsensor) int32
    sensor_interval: jax.Array  # (nsensor, 2) float64
    sensor_intprm: np.ndarray  # (nsensor, 3) int32
    sensor_needstage: np.ndarray  # (nsensor) int32
    sensor_noise: jax.Array  # (nsensor) float64
    sensor_objid: np.ndarray  # (nsensor) int32
    sensor_objtype: np.ndarray  # (nsensor) int32
    sensor_refid: np.ndarray  # (nsensor) int32
    sensor_reftype: np.ndarray  # (nsensor) int32
    sensor_type: np.ndarray  # (nsensor) int32
    sensor_user: jax.Array  # (nsensor, nuser_sensor) float64
    key_act: jax.Array  # (nkey, na) float64
    key_ctrl: jax.Array  # (nkey, nu) float64
    key_mpos: jax.Array  # (nkey, nmocap*3) float64
    key_mquat: jax.Array  # (nkey, nmocap*4) float64
    key_qpos: jax.Array  # (nkey, nq) float64
    key_qvel: jax.Array  # (nkey, nv) float64
    key_time: jax.Array  # (nkey) float64

    # custom numeric and text (numeric_data per element, text as strings)
    numeric_data: tuple  # (nnumeric,) tuples of floats
    text_data: tuple  # (ntext,) strings
    # names per object kind: ((kind, (name, ...)), ...); kind as in mjtObj, lower case
    names: tuple
    # compiler-derived static plans (not in mjModel)
    body_depth: np.ndarray  # (nbody,) depth in the kinematic tree, world = 0
    wrap_sideid: np.ndarray  # (nwrap,) side site of a sphere/cylinder wrap (wrap_prm), or -1
    dof_depth: np.ndarray  # (nv,) depth of the dof's body
    # (ngeom,) geom_rbound plus the largest margin + gap of the geom (or of a pair it is
    # in) at compile time, the margin alone for a height field: static sizes of the
    # height-field prism windows (interop.geom_reach, collision.hfield)
    geom_reach: np.ndarray
    # (ngeom,) that largest margin + gap alone: a height-field group whose pairs all have
    # none is built without the margin's queries (collision.hfield)
    geom_extra: np.ndarray
    hfield_cell: np.ndarray  # (nhfield, 2) grid spacing dx, dy at compile time (static)
    # (ngeom,) bool: geom_fluid's interaction coefficient (column 0, fluidshape="ellipsoid")
    # non-zero at compile time; passive.fluid evaluates the ellipsoid model on these geoms only
    geom_fluidshape: np.ndarray
    signature: int


class Data(PyTreeNode):
    """Simulation state and results (mjData), no batch dimension: batch with ``jax.vmap``.

    3x3 matrices are (..., 3, 3). ``qM`` is the dense (nv, nv) joint-space inertia (MuJoCo 4.0
    keeps a sparse ``M``; use ``full_m`` for MuJoCo's dense form). Constraint-solver fields
    (``efc_*``) are added by the constraint issue with a static row budget; ``contact`` and
    ``ncon`` are written by ``collision.driver.collision`` (static slots, ``contact.valid``).
    """

    # state
    time: jax.Array
    qpos: jax.Array  # (nq,)
    qvel: jax.Array  # (nv,)
    act: jax.Array  # (na,)
    qacc_warmstart: jax.Array  # (nv,)
    # control
    ctrl: jax.Array  # (nu,)
    qfrc_applied: jax.Array  # (nv,)
    xfrc_applied: jax.Array  # (nbody, 6)
    eq_active: jax.Array  # (neq,) bool
    mocap_pos: jax.Array  # (nmocap, 3)
    mocap_quat: jax.Array  # (nmocap, 4)
    # dynamics
    qacc: jax.Array  # (nv,)
    act_dot: jax.Array  # (na,)
    userdata: jax.Array  # (nuserdata,)
    sensordata: jax.Array  # (nsensordata,)
    # position-dependent
    xpos: jax.Array  # (nbody, 3)
    xquat: jax.Array  # (nbody, 4)
    xmat: jax.Array  # (nbody, 3, 3)
    xipos: jax.Array  # (nbody, 3)
    ximat: jax.Array  # (nbody, 3, 3)
    xanchor: jax.Array  # (njnt, 3)
    xaxis: jax.Array  # (njnt, 3)
    geom_xpos: jax.Array  # (ngeom, 3)
    geom_xmat: jax.Array  # (ngeom, 3, 3)
    site_xpos: jax.Array  # (nsite, 3)
    site_xmat: jax.Array  # (nsite, 3, 3)
    cam_xpos: jax.Array  # (ncam, 3)
    cam_xmat: jax.Array  # (ncam, 3, 3)
    light_xpos: jax.Array  # (nlight, 3)
    light_xdir: jax.Array  # (nlight, 3)
    subtree_com: jax.Array  # (nbody, 3)
    cdof: jax.Array  # (nv, 6)
    cinert: jax.Array  # (nbody, 10)
    ten_wrapadr: jax.Array  # (ntendon,) int
    ten_wrapnum: jax.Array  # (ntendon,) int
    ten_J: jax.Array  # (ntendon, nv)
    ten_length: jax.Array  # (ntendon,)
    wrap_obj: jax.Array  # (nwrap, 2) int
    wrap_xpos: jax.Array  # (nwrap, 6)
    actuator_length: jax.Array  # (nu,)
    actuator_moment: jax.Array  # (nu, nv)
    crb: jax.Array  # (nbody, 10)
    qM: jax.Array  # (nv, nv)
    qLD: jax.Array  # (nv, nv) factor of qM (layout chosen by smooth.factor_m)
    qLDiagInv: jax.Array  # (nv,)
    # collision (static slot budget: collision.driver.contact_budget; see Contact)
    ncon: jax.Array  # () int, number of valid contact slots
    contact: Contact  # (ncon_slots,) fields
    # velocity-dependent
    ten_velocity: jax.Array  # (ntendon,)
    actuator_velocity: jax.Array  # (nu,)
    cvel: jax.Array  # (nbody, 6)
    cdof_dot: jax.Array  # (nv, 6)
    qfrc_bias: jax.Array  # (nv,)
    qfrc_spring: jax.Array  # (nv,)
    qfrc_damper: jax.Array  # (nv,)
    qfrc_gravcomp: jax.Array  # (nv,)
    qfrc_fluid: jax.Array  # (nv,)
    qfrc_passive: jax.Array  # (nv,)
    subtree_linvel: jax.Array  # (nbody, 3)
    subtree_angmom: jax.Array  # (nbody, 3)
    # acceleration/force-dependent
    actuator_force: jax.Array  # (nu,)
    qfrc_actuator: jax.Array  # (nv,)
    qfrc_smooth: jax.Array  # (nv,)
    qacc_smooth: jax.Array  # (nv,)
    qfrc_constraint: jax.Array  # (nv,)
    qfrc_inverse: jax.Array  # (nv,)
    cacc: jax.Array  # (nbody, 6)
    cfrc_int: jax.Array  # (nbody, 6)
    cfrc_ext: jax.Array  # (nbody, 6)
    energy: jax.Array  # (2,)
    solver_niter: jax.Array  # (mjNISLAND=20,) int, per island (index 0 without islands)
    # islands (island.py, mj_island): -1 for trees, dofs and rows in no island
    nisland: jax.Array  # () int
    tree_island: jax.Array  # (ntree,) int
    dof_island: jax.Array  # (nv,) int
    efc_island: jax.Array  # (nefc,) int, our row layout
    warning_count: jax.Array  # (7,) int, indexed by mjtWarning (4.0: no VGEOMFULL)
    # constraint rows (constraint.py): a static budget of nefc rows, MuJoCo's order (equality,
    # friction loss, limit, contact); rows MuJoCo would not create have efc_active False and
    # zero J and D. efc_active is not in mjData: compacting by it gives MuJoCo's efc arrays.
    efc_type: jax.Array  # (nefc,) int mjtConstraint
    efc_id: jax.Array  # (nefc,) int id of the element (contact slot for contacts)
    efc_J: jax.Array  # (nefc, nv) dense
    efc_pos: jax.Array  # (nefc,)
    efc_margin: jax.Array  # (nefc,)
    efc_frictionloss: jax.Array  # (nefc,)
    efc_diagA: jax.Array  # (nefc,) diagonal approximation of A (after impedance adjustment)
    efc_KBIP: jax.Array  # (nefc, 4) stiffness, damping, impedance, impedance derivative
    efc_D: jax.Array  # (nefc,) 1 / R (0 for inactive rows)
    efc_R: jax.Array  # (nefc,)
    efc_vel: jax.Array  # (nefc,) J qvel
    efc_aref: jax.Array  # (nefc,) reference acceleration
    efc_force: jax.Array  # (nefc,)
    efc_state: jax.Array  # (nefc,) int mjtConstraintState
    efc_active: jax.Array  # (nefc,) bool
