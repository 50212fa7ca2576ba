"""Sensors -> sensor_type/datatype/needstage/objtype/objid/reftype/refid/intprm/dim/adr/...

XML reference (MuJoCo 4.0 wheel, ``doc/XMLreference.rst``), section ``sensor``. Each sensor
reads one object (site, joint, tendon, actuator, body, frame object), some a reference object;
the table below gives the type, output size, data type and computation stage MuJoCo 4.0
assigns (measured against ``mujoco==4.0.0``). Contact and rangefinder sensors pack their
``data`` fields into a bit mask in sensor_intprm[0].
"""

from __future__ import annotations

import numpy as np

from mjx_lite.compiler.actuators import user_array
from mjx_lite.compiler.context import Context
from mjx_lite.types import DataType, GeomType, JointType, ObjType, SensorType, Stage

R, P, A, Q = DataType.REAL, DataType.POSITIVE, DataType.AXIS, DataType.QUATERNION
S1, S2, S3 = Stage.POS, Stage.VEL, Stage.ACC

# tag -> (type, dim, datatype, stage, attribute naming the object, its kind)
_TABLE = {
    "touch": (SensorType.TOUCH, 1, P, S3, "site", "site"),
    "accelerometer": (SensorType.ACCELEROMETER, 3, R, S3, "site", "site"),
    "velocimeter": (SensorType.VELOCIMETER, 3, R, S2, "site", "site"),
    "gyro": (SensorType.GYRO, 3, R, S2, "site", "site"),
    "force": (SensorType.FORCE, 3, R, S3, "site", "site"),
    "torque": (SensorType.TORQUE, 3, R, S3, "site", "site"),
    "magnetometer": (SensorType.MAGNETOMETER, 3, R, S1, "site", "site"),
    "camprojection": (SensorType.CAMPROJECTION, 2, R, S1, "site", "site"),
    "rangefinder": (SensorType.RANGEFINDER, 1, R, S1, None, None),
    "jointpos": (SensorType.JOINTPOS, 1, R, S1, "joint", "jnt"),
    "jointvel": (SensorType.JOINTVEL, 1, R, S2, "joint", "jnt"),
    "tendonpos": (SensorType.TENDONPOS, 1, R, S1, "tendon", "tendon"),
    "tendonvel": (SensorType.TENDONVEL, 1, R, S2, "tendon", "tendon"),
    "actuatorpos": (SensorType.ACTUATORPOS, 1, R, S1, "actuator", "actuator"),
    "actuatorvel": (SensorType.ACTUATORVEL, 1, R, S2, "actuator", "actuator"),
    "actuatorfrc": (SensorType.ACTUATORFRC, 1, R, S3, "actuator", "actuator"),
    "jointactuatorfrc": (SensorType.JOINTACTFRC, 1, R, S3, "joint", "jnt"),
    "tendonactuatorfrc": (SensorType.TENDONACTFRC, 1, R, S3, "tendon", "tendon"),
    "ballquat": (SensorType.BALLQUAT, 4, Q, S1, "joint", "jnt"),
    "ballangvel": (SensorType.BALLANGVEL, 3, R, S2, "joint", "jnt"),
    "jointlimitpos": (SensorType.JOINTLIMITPOS, 1, R, S1, "joint", "jnt"),
    "jointlimitvel": (SensorType.JOINTLIMITVEL, 1, R, S2, "joint", "jnt"),
    "jointlimitfrc": (SensorType.JOINTLIMITFRC, 1, R, S3, "joint", "jnt"),
    "tendonlimitpos": (SensorType.TENDONLIMITPOS, 1, R, S1, "tendon", "tendon"),
    "tendonlimitvel": (SensorType.TENDONLIMITVEL, 1, R, S2, "tendon", "tendon"),
    "tendonlimitfrc": (SensorType.TENDONLIMITFRC, 1, R, S3, "tendon", "tendon"),
    "framepos": (SensorType.FRAMEPOS, 3, R, S1, "objname", None),
    "framequat": (SensorType.FRAMEQUAT, 4, Q, S1, "objname", None),
    "framexaxis": (SensorType.FRAMEXAXIS, 3, A, S1, "objname", None),
    "frameyaxis": (SensorType.FRAMEYAXIS, 3, A, S1, "objname", None),
    "framezaxis": (SensorType.FRAMEZAXIS, 3, A, S1, "objname", None),
    "framelinvel": (SensorType.FRAMELINVEL, 3, R, S2, "objname", None),
    "frameangvel": (SensorType.FRAMEANGVEL, 3, R, S2, "objname", None),
    "framelinacc": (SensorType.FRAMELINACC, 3, R, S3, "objname", None),
    "frameangacc": (SensorType.FRAMEANGACC, 3, R, S3, "objname", None),
    "subtreecom": (SensorType.SUBTREECOM, 3, R, S1, "body", "body"),
    "subtreelinvel": (SensorType.SUBTREELINVEL, 3, R, S2, "body", "body"),
    "subtreeangmom": (SensorType.SUBTREEANGMOM, 3, R, S2, "body", "body"),
    "insidesite": (SensorType.INSIDESITE, 1, P, S1, "objname", None),
    "distance": (SensorType.GEOMDIST, 1, R, S1, None, None),
    "normal": (SensorType.GEOMNORMAL, 3, A, S1, None, None),
    "fromto": (SensorType.GEOMFROMTO, 6, R, S1, None, None),
    "contact": (SensorType.CONTACT, 1, R, S1, None, None),
    "e_potential": (SensorType.E_POTENTIAL, 1, R, S1, None, None),
    "e_kinetic": (SensorType.E_KINETIC, 1, R, S1, None, None),
    "clock": (SensorType.CLOCK, 1, R, S1, None, None),
    "user": (SensorType.USER, 1, R, S3, "objname", None),
}
_FRAME_OBJ = {"body": (ObjType.BODY, "body"), "xbody": (ObjType.XBODY, "body"),
              "geom": (ObjType.GEOM, "geom"), "site": (ObjType.SITE, "site"),
              "camera": (ObjType.CAMERA, "cam")}
# data fields of contact and rangefinder sensors: (name, size), bit i of intprm[0] each.
_CONTACT_DATA = (("found", 1), ("force", 3), ("torque", 3), ("dist", 1), ("pos", 3),
                 ("normal", 3), ("tangent", 3), ("linvel", 3), ("angvel", 3))
_RAY_DATA = (("dist", 1), ("dir", 3), ("origin", 3), ("point", 3), ("normal", 3),
             ("depth", 1))
_REDUCE = {"none": 0, "mindist": 1, "maxforce": 2, "netforce": 3}
_DATATYPE = {"real": R, "positive": P, "axis": A, "quaternion": Q}
_STAGE = {"pos": S1, "vel": S2, "acc": S3}
_JOINT_SENSORS_SCALAR = ("jointpos", "jointvel", "jointactuatorfrc", "jointlimitpos",
                         "jointlimitvel", "jointlimitfrc")


def _data_mask(el, table: tuple, default: str) -> tuple[int, int]:
    """Bit mask and per-item size of a space-separated ordered subset of ``table`` names."""
    words = (el.raw("data") or default).split()
    names = [n for n, _ in table]
    mask, size, last = 0, 0, -1
    for w in words:
        if w not in names:
            raise el.error(f"attribute 'data' has invalid value '{w}' "
                           f"(expected some of {', '.join(names)})")
        k = names.index(w)
        if k <= last:
            raise el.error(f"data attributes must be in order: {', '.join(names)}")
        last = k
        mask |= 1 << k
        size += table[k][1]
    return mask, size


def _either(ctx: Context, el, options: tuple, required: bool):
    """(objtype, id) of the one attribute given among ``options`` = ((attr, objtype, kind),)."""
    given = [o for o in options if el.has(o[0])]
    if len(given) > 1:
        raise el.error("at most one of " + ", ".join(f"'{o[0]}'" for o in options)
                       + " can be specified")
    if not given:
        if required:
            raise el.error("one of " + ", ".join(f"'{o[0]}'" for o in options)
                           + " must be specified")
        return ObjType.UNKNOWN, -1
    attr, objtype, kind = given[0]
    return objtype, ctx.lookup(kind, el.get(attr), el, attr)


def build_sensors(ctx: Context) -> dict:
    """nsensor, nsensordata and the sensor_* fields in document order."""
    f = ctx.fields
    elements = ctx.spec.section("sensor")
    n = len(elements)
    out = {
        "sensor_type": np.zeros(n, np.int32), "sensor_datatype": np.zeros(n, np.int32),
        "sensor_needstage": np.zeros(n, np.int32), "sensor_objtype": np.zeros(n, np.int32),
        "sensor_objid": np.full(n, -1, np.int32), "sensor_reftype": np.zeros(n, np.int32),
        "sensor_refid": np.full(n, -1, np.int32), "sensor_intprm": np.zeros((n, 3), np.int32),
        "sensor_dim": np.zeros(n, np.int32), "sensor_adr": np.zeros(n, np.int32),
        "sensor_cutoff": np.zeros(n), "sensor_noise": np.zeros(n),
        "sensor_delay": np.zeros(n), "sensor_interval": np.zeros((n, 2)),
    }
    users = []
    adr = 0
    for i, el in enumerate(elements):
        ctx.register("sensor", el)
        if el.tag not in _TABLE:
            raise el.error(f"unsupported: {el.tag} sensors are not implemented by mjx_lite")
        stype, dim, dtype, stage, attr, kind = _TABLE[el.tag]
        objtype, objid, reftype, refid = ObjType.UNKNOWN, -1, ObjType.UNKNOWN, -1
        intprm = [0, 0, 0]
        if kind is not None:
            objtype = {"site": ObjType.SITE, "jnt": ObjType.JOINT, "tendon": ObjType.TENDON,
                       "actuator": ObjType.ACTUATOR, "body": ObjType.BODY}[kind]
            objid = ctx.lookup(kind, el.get(attr), el, attr)
        elif attr == "objname" and (el.tag != "user" or el.has("objtype")):
            objtype, okind = _FRAME_OBJ[el.get("objtype")]
            objid = ctx.lookup(okind, el.get("objname"), el, "objname")

        if el.tag == "touch" or (el.tag == "insidesite" and el.has("site")):
            zone = objid if el.tag == "touch" else ctx.lookup("site", el.get("site"), el, "site")
            if int(f["site_type"][zone]) == GeomType.MESH:
                raise el.error(f"unsupported: {el.tag} sensor on a mesh site (MuJoCo tests the "
                               "mesh volume) is not implemented by mjx_lite")
        if el.tag in _JOINT_SENSORS_SCALAR or el.tag in ("ballquat", "ballangvel"):
            jtype = int(f["jnt_type"][objid])
            if el.tag.startswith("ball"):
                if jtype != JointType.BALL:
                    raise el.error("joint must be ball in sensor")
            elif jtype not in (JointType.SLIDE, JointType.HINGE):
                raise el.error("joint must be slide or hinge in sensor")
            if el.tag.startswith("jointlimit") and not f["jnt_limited"][objid]:
                raise el.error("joint must be limited in sensor")
        if el.tag.startswith("tendonlimit") and not f["tendon_limited"][objid]:
            raise el.error("tendon must be limited in sensor")

        if el.tag.startswith("frame") and el.tag not in ("framelinacc", "frameangacc"):
            if el.has("reftype") != el.has("refname"):
                raise el.error("attributes 'reftype', 'refname' must be specified together")
            if el.has("refname"):
                reftype, rkind = _FRAME_OBJ[el.get("reftype")]
                refid = ctx.lookup(rkind, el.get("refname"), el, "refname")
        elif el.tag == "camprojection":
            reftype = ObjType.CAMERA
            refid = ctx.lookup("cam", el.get("camera"), el, "camera")
            cam_el = ctx.elements.get("cam", [None] * (refid + 1))[refid]
            if cam_el is not None and (cam_el.has("sensorsize") or cam_el.has("focal")
                                       or cam_el.has("focalpixel")):
                raise el.error("unsupported: camprojection with a camera given by sensorsize"
                               " / focal (intrinsics) is not implemented by mjx_lite")
        elif el.tag == "rangefinder":
            objtype, objid = _either(ctx, el, (("site", ObjType.SITE, "site"),
                                               ("camera", ObjType.CAMERA, "cam")), True)
            mask, size = _data_mask(el, _RAY_DATA, "dist")
            intprm[0] = mask
            rays = 1
            if objtype == ObjType.CAMERA:
                rays = int(np.prod(f["cam_resolution"][objid]))
                cam_el = ctx.elements.get("cam", [None] * (objid + 1))[objid]
                if cam_el is not None and (cam_el.has("sensorsize") or cam_el.has("focal")
                                           or cam_el.has("focalpixel")):
                    raise el.error("unsupported: rangefinder on a camera given by sensorsize"
                                   " / focal (intrinsics) is not implemented by mjx_lite")
            dim = rays * size
        elif el.tag == "insidesite":
            if not el.has("site"):
                raise el.error("missing required attribute 'site'")
            reftype = ObjType.SITE
            refid = ctx.lookup("site", el.get("site"), el, "site")
            enclosed = (el.raw("enclosed") or "false").strip().lower()
            if enclosed not in ("false", "true"):
                raise el.error(f"attribute 'enclosed' must be false or true, got '{enclosed}'")
            if enclosed == "true":
                # Signed protrusion distance instead of a 0/1 flag (insidesite/enclosed).
                intprm[0], dtype = 1, R
        elif el.tag in ("distance", "normal", "fromto"):
            objtype, objid = _either(ctx, el, (("geom1", ObjType.GEOM, "geom"),
                                               ("body1", ObjType.BODY, "body")), True)
            reftype, refid = _either(ctx, el, (("geom2", ObjType.GEOM, "geom"),
                                               ("body2", ObjType.BODY, "body")), True)
        elif el.tag == "contact":
            objtype, objid = _either(ctx, el, (("geom1", ObjType.GEOM, "geom"),
                                               ("body1", ObjType.BODY, "body"),
                                               ("subtree1", ObjType.XBODY, "body"),
                                               ("site", ObjType.SITE, "site")), False)
            reftype, refid = _either(ctx, el, (("geom2", ObjType.GEOM, "geom"),
                                               ("body2", ObjType.BODY, "body"),
                                               ("subtree2", ObjType.XBODY, "body")), False)
            mask, size = _data_mask(el, _CONTACT_DATA, "found")
            reduce = _REDUCE[el.get("reduce", "none")]
            num = el.get("num", 1)
            if num <= 0:
                raise el.error("contact sensor num must be positive")
            if reduce == 3 and mask & (1 << 7 | 1 << 8):
                raise el.error("netforce reduction is incompatible with linvel or angvel")
            intprm = [mask, reduce, num]
            dim = num * size
            # Stage by the fields it reads (sensor/contact, "Computation stage").
            if mask & (1 << 1 | 1 << 2) or reduce in (2, 3):
                stage = S3
            elif mask & (1 << 7 | 1 << 8):
                stage = S2
        elif el.tag == "user":
            dim = el.get("dim")
            if dim <= 0:
                raise el.error("sensor dim must be positive")
            dtype = _DATATYPE[el.get("datatype", "real")]
            stage = _STAGE[el.get("needstage", "acc")]

        cutoff, noise = el.get("cutoff", 0.0), el.get("noise", 0.0)
        if cutoff < 0:
            raise el.error("negative cutoff in sensor")
        if noise < 0:
            raise el.error("negative noise in sensor")
        if el.get("nsample", 0) > 0 or el.get("delay", 0.0) > 0:
            raise el.error("unsupported: sensor history buffers (nsample, delay) are not "
                           "implemented by mjx_lite")
        interval = el.vec("interval", (0.0, 0.0))
        if interval[0] < 0:
            raise el.error("negative interval in sensor")
        if interval[1] > 0:
            raise el.error("positive phase in sensor")
        out["sensor_type"][i] = stype
        out["sensor_datatype"][i] = dtype
        out["sensor_needstage"][i] = stage
        out["sensor_objtype"][i], out["sensor_objid"][i] = objtype, objid
        out["sensor_reftype"][i], out["sensor_refid"][i] = reftype, refid
        out["sensor_intprm"][i] = intprm
        out["sensor_dim"][i] = dim
        out["sensor_adr"][i] = adr
        out["sensor_cutoff"][i] = cutoff
        out["sensor_noise"][i] = noise
        out["sensor_interval"][i] = interval
        adr += dim
        users.append(None if not el.has("user") else np.atleast_1d(el.get("user")))
    out["sensor_user"] = user_array(ctx, "sensor", users, elements)
    out["nuser_sensor"] = out["sensor_user"].shape[1]
    out["nsensor"] = n
    out["nsensordata"] = adr
    ctx.fields.update(out)
    return out
