"""Actuators: general and every shortcut -> dyn/gain/bias types and parameter arrays.

XML reference (MuJoCo 4.0 wheel, ``doc/XMLreference.rst``), sections ``actuator/general`` and
the shortcuts ``motor`` ... ``adhesion``. A shortcut writes the internal defaults of its own
parameters, "regardless of any default settings" (``actuator/motor``), except where a
default class actuator was written by the same shortcut, or by ``general`` with the
shortcut's gain type: then the shortcut's own attributes default to what that class holds,
taken from the element's class if it qualifies, else from the nearest enclosing class that
does. MuJoCo 4.0 behaves this way (measured against ``mujoco==4.0.0``, see the class matrix
and two-level tests in ``tests/test_compile_elements.py``); this module replays each class's
shortcut list (``DefaultClass.actuator_ops``), outermost class first, and then the element
on one actuator record.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from mjx_lite.compiler import build
from mjx_lite.compiler.context import Context
from mjx_lite.compiler.parse import Element, convert
from mjx_lite.compiler.schema import SCHEMA
from mjx_lite.types import BiasType, DynType, GainType, TrnType

NPRM = 10
# actuator_ctrlspec values of the declared single input (``actuator/general/input``).
_INPUT_SPEC = {"": 0, "pos": 1, "vel": 2, "pressure": 32}
_SHORTCUT_SPEC = {"position": 1, "velocity": 2, "intvelocity": 2, "cylinder": 32}
_SHORTCUT_GAIN = {"motor": GainType.FIXED, "position": GainType.FIXED,
                  "velocity": GainType.FIXED, "intvelocity": GainType.FIXED,
                  "damper": GainType.AFFINE, "cylinder": GainType.FIXED,
                  "muscle": GainType.MUSCLE, "adhesion": GainType.FIXED}
_DYN = {"none": DynType.NONE, "integrator": DynType.INTEGRATOR, "filter": DynType.FILTER,
        "filterexact": DynType.FILTEREXACT, "muscle": DynType.MUSCLE, "user": DynType.USER}
_GAIN = {"fixed": GainType.FIXED, "affine": GainType.AFFINE, "muscle": GainType.MUSCLE,
         "user": GainType.USER}
_BIAS = {"none": BiasType.NONE, "affine": BiasType.AFFINE, "muscle": BiasType.MUSCLE,
         "user": BiasType.USER}
# Muscle internal defaults (``actuator/muscle``): timeconst(2) tausmooth / range(2) force
# scale lmin lmax vmax fpmax fvmax.
_MUSCLE_DYN = (0.01, 0.04, 0.0)
_MUSCLE_GAIN = (0.75, 1.05, -1.0, 200.0, 0.5, 1.6, 1.5, 1.3, 1.2)
# Transmission attributes in the order MuJoCo reads them: a later one replaces an earlier one.
_TRN_ATTRS = (("joint", TrnType.JOINT, "jnt"), ("jointinparent", TrnType.JOINTINPARENT, "jnt"),
              ("tendon", TrnType.TENDON, "tendon"), ("cranksite", TrnType.SLIDERCRANK, "site"),
              ("site", TrnType.SITE, "site"), ("body", TrnType.BODY, "body"))
_COMMON_VEC = {"ctrlrange": 2, "forcerange": 2, "actrange": 2, "lengthrange": 2, "gear": 6,
               "damping": 3}
_COMMON_SCALAR = ("cranklength", "armature", "delay")


def _actuator_schema(tag: str) -> dict:
    section = next(c for c in SCHEMA["children"] if c["name"] == "actuator")
    return next(c for c in section["children"] if c["name"] == tag)


def _prm(first: float | None = 1.0) -> np.ndarray:
    out = np.zeros(NPRM)
    if first is not None:
        out[0] = first
    return out


class _Record:
    """The actuator being assembled: what a default class or element has written so far."""

    def __init__(self):
        self.dyntype, self.gaintype, self.biastype = DynType.NONE, GainType.FIXED, BiasType.NONE
        self.dynprm, self.gainprm, self.biasprm = _prm(), _prm(), _prm(None)
        self.spec = 0
        self.tag: str | None = None  # the shortcut (or "general") that wrote it last
        self.actearly = False
        self.actdim = -1
        self.inheritrange = 0.0
        self.flags = {"ctrllimited": "auto", "forcelimited": "auto", "actlimited": "auto"}
        self.vec = {k: np.zeros(n) for k, n in _COMMON_VEC.items()}
        self.vec["gear"][0] = 1.0
        self.scalar = {k: 0.0 for k in _COMMON_SCALAR}
        self.has = set()  # range attributes written anywhere (for autolimits)
        self.group = 0
        self.user = None
        self.nsample = 0

    def copy(self) -> _Record:
        return copy.deepcopy(self)


def _compatible(rec: _Record, tag: str) -> bool:
    return rec.tag == tag or (rec.tag in (None, "general")
                              and rec.gaintype == _SHORTCUT_GAIN[tag])


def _apply(rec: _Record, tag: str, attrs: dict, el: Element, ancestors=()) -> None:
    """Applies one <general> or shortcut (from a default class or the element) to ``rec``.

    ``ancestors``: the actuator records of the enclosing default classes, outermost first.
    """
    schema = _actuator_schema(tag)

    def val(name, default=None):
        if name not in attrs:
            return default
        return convert(schema["attrs"][name], attrs[name], name, el)

    def given(name) -> bool:
        return name in attrs

    # Common attributes (``actuator/general``): vectors fill their leading entries.
    for name in ("ctrllimited", "forcelimited", "actlimited"):
        if given(name):
            rec.flags[name] = val(name)
    for name in _COMMON_VEC:
        if given(name):
            v = np.atleast_1d(np.asarray(val(name), dtype=float))
            rec.vec[name][: v.size] = v[: rec.vec[name].size]
            rec.has.add(name)
    for name in _COMMON_SCALAR:
        if given(name):
            rec.scalar[name] = float(val(name))
    if given("group"):
        rec.group = val("group")
    if given("user"):
        rec.user = np.atleast_1d(val("user"))
    if given("nsample"):
        rec.nsample = val("nsample")

    if tag == "general":
        old_gain = rec.gaintype
        if given("dyntype"):
            rec.dyntype = _DYN.get(val("dyntype"))
        if given("gaintype"):
            rec.gaintype = _GAIN.get(val("gaintype"))
        if given("biastype"):
            rec.biastype = _BIAS.get(val("biastype"))
        if None in (rec.dyntype, rec.gaintype, rec.biastype):
            raise el.error("unsupported: dcmotor, pid and so3 actuator dynamics/gain/bias "
                           "types are not implemented by mjx_lite")
        for name in ("dynprm", "gainprm", "biasprm"):
            if given(name):
                v = np.atleast_1d(np.asarray(val(name), dtype=float))
                getattr(rec, name)[: v.size] = v[:NPRM]
        # An inherited input declaration is dropped when the gain type changes
        # (``actuator/general/input``).
        if rec.gaintype != old_gain:
            rec.spec = 0
        if given("input"):
            word = val("input").strip()
            if word not in _INPUT_SPEC:
                raise el.error(f"unsupported: actuator input '{word}' is not implemented "
                               "by mjx_lite")
            rec.spec = _INPUT_SPEC[word]
        if given("actearly"):
            rec.actearly = val("actearly") == "true"
        if given("actdim"):
            rec.actdim = int(val("actdim"))
        if given("inheritrange"):
            rec.inheritrange = float(val("inheritrange"))
        for name in ("velrange", "ffrange"):
            if given(name):
                raise el.error(f"unsupported: attribute '{name}' (pid inputs) is not "
                               "implemented by mjx_lite")
        rec.tag = "general"
        return

    # A shortcut keeps the parameters of a class actuator written by the same shortcut, or
    # by <general> (or nothing) with the same gain type: the current one if so, else the
    # nearest such ancestor class (measured on MuJoCo 4.0); otherwise its internal defaults.
    src = next((r for r in (rec, *reversed(ancestors)) if _compatible(r, tag)), None)
    dynprm, gainprm, biasprm = _prm(), _prm(), _prm(None)
    dyntype, gaintype, biastype = DynType.NONE, GainType.FIXED, BiasType.NONE
    inherit = src.inheritrange if src else 0.0

    def damping_term() -> float:
        """biasprm[2]: -kv, or a positive dampratio resolved later (``position/dampratio``)."""
        b2 = src.biasprm[2] if src else 0.0
        if given("kv") and given("dampratio"):
            raise el.error("kv and dampratio cannot both be defined")
        if given("kv"):
            if val("kv") < 0:
                raise el.error("kv cannot be negative")
            b2 = -val("kv")
        if given("dampratio"):
            if val("dampratio") < 0:
                raise el.error("dampratio cannot be negative")
            b2 = val("dampratio")
        return b2

    if tag == "motor":
        pass
    elif tag in ("position", "intvelocity"):
        kp = val("kp", src.gainprm[0] if src else 1.0)
        if kp < 0:
            raise el.error("kp cannot be negative")
        gainprm[0] = kp
        biasprm[1] = -kp
        biasprm[2] = damping_term()
        biastype = BiasType.AFFINE
        if given("inheritrange"):
            inherit = val("inheritrange")
            if inherit > 0 and given("ctrlrange") and tag == "position":
                raise el.error("ctrlrange and inheritrange cannot both be defined")
        # Both servos keep a filter time constant held by a compatible class actuator
        # (intvelocity has no timeconst attribute but keeps the value; measured on 4.0).
        timeconst = val("timeconst")
        if timeconst is None and src and src.dyntype == DynType.FILTEREXACT:
            timeconst = src.dynprm[0]
        if timeconst is not None:
            if timeconst < 0:
                raise el.error("timeconst cannot be negative")
            dynprm[0] = timeconst
            dyntype = DynType.FILTEREXACT if timeconst > 0 else DynType.NONE
        if tag == "intvelocity":
            dyntype = DynType.INTEGRATOR
    elif tag == "velocity":
        kv = val("kv", src.gainprm[0] if src else 1.0)
        if kv < 0:
            raise el.error("kv cannot be negative")
        gainprm[0] = kv
        biasprm[2] = -kv
        biastype = BiasType.AFFINE
    elif tag == "damper":
        kv = val("kv", -src.gainprm[2] if src else 0.0)
        if kv < 0:
            raise el.error("damping coefficient cannot be negative")
        gainprm[0] = 0.0
        gainprm[2] = -kv
        gaintype = GainType.AFFINE
        rec.flags["ctrllimited"] = "true"
    elif tag == "cylinder":
        dynprm[0] = val("timeconst", src.dynprm[0] if src else 1.0)
        gainprm[0] = val("area", src.gainprm[0] if src else 1.0)
        if given("diameter"):  # diameter takes precedence over area (``cylinder/diameter``)
            gainprm[0] = math.pi / 4 * val("diameter") ** 2
        biasprm[:3] = src.biasprm[:3] if src else 0.0
        if given("bias"):
            biasprm[:3] = val("bias")
        dyntype, biastype = DynType.FILTER, BiasType.AFFINE
    elif tag == "muscle":
        if src:
            dynprm[:3] = src.dynprm[:3]
            gainprm[:9] = src.gainprm[:9]
        else:
            dynprm[:3] = _MUSCLE_DYN
            gainprm[:9] = _MUSCLE_GAIN
        if given("timeconst"):
            dynprm[:2] = val("timeconst")
        if given("tausmooth"):
            if val("tausmooth") < 0:
                raise el.error("muscle tausmooth cannot be negative")
            dynprm[2] = val("tausmooth")
        if given("range"):
            gainprm[:2] = val("range")
        for i, name in enumerate(("force", "scale", "lmin", "lmax", "vmax", "fpmax", "fvmax")):
            if given(name):
                gainprm[2 + i] = val(name)
        biasprm = gainprm.copy()
        dyntype, gaintype, biastype = DynType.MUSCLE, GainType.MUSCLE, BiasType.MUSCLE
    elif tag == "adhesion":
        gain = val("gain", src.gainprm[0] if src else 1.0)
        if gain < 0:
            raise el.error("adhesion gain cannot be negative")
        gainprm[0] = gain
        rec.flags["ctrllimited"] = "true"
    else:
        raise el.error(f"unsupported: {tag} actuator is not implemented by mjx_lite")
    rec.dyntype, rec.gaintype, rec.biastype = dyntype, gaintype, biastype
    rec.dynprm, rec.gainprm, rec.biasprm = dynprm, gainprm, biasprm
    rec.spec = _SHORTCUT_SPEC.get(tag, 0)
    if tag in ("position", "intvelocity"):
        rec.inheritrange = inherit
        if inherit > 0 and tag == "position":
            rec.vec["ctrlrange"][:] = 0.0  # to be inherited from the target at compile time
    rec.actearly, rec.actdim = False, -1
    rec.tag = tag


def _position_like(rec: _Record, gains=(GainType.FIXED, GainType.AFFINE)) -> bool:
    """Affine bias, gainprm[0] = -biasprm[1]: a position servo, whose positive biasprm[2] is a
    dampratio; inheritrange wants a fixed gain too (``actuator/general/inheritrange``)."""
    return (rec.biastype == BiasType.AFFINE and rec.gaintype in gains
            and rec.gainprm[0] == -rec.biasprm[1])


def _record(ctx: Context, el: Element) -> _Record:
    """Replays the default classes' actuator shortcuts (outermost class first), then the
    element itself."""
    chain = []
    cls = ctx.spec.classes[el.cls]
    while cls is not None:
        chain.append(cls)
        cls = cls.parent
    rec, ancestors = _Record(), []
    for cls in reversed(chain):
        inherited = len(cls.parent.actuator_ops) if cls.parent is not None else 0
        for tag, attrs in cls.actuator_ops[inherited:]:
            attrs = {k: v for k, v in attrs.items() if k not in ("name", "class")}
            _apply(rec, tag, attrs, el, ancestors)
        ancestors.append(rec.copy())
    _apply(rec, el.tag, {k: v for k, v in el.attrs.items() if k != "class"}, el,
           ancestors[:-1])
    return rec


def _limited(ctx: Context, rec: _Record, el: Element, flag: str, rng: str) -> bool:
    """[false, true, auto] with compiler autolimits (``actuator/general/ctrllimited``)."""
    value = rec.flags[flag]
    if value == "auto":
        if not ctx.autolimits:
            if rng in rec.has:
                raise el.error(f"attribute '{rng}' is set without '{flag}' while compiler "
                               "autolimits is false")
            return False
        lo, hi = rec.vec[rng]
        return bool(lo < hi)
    return value == "true"


def user_array(ctx: Context, kind: str, users: list, elements: list) -> np.ndarray:
    """(n, nuser_kind) user parameters, with size/nuser_kind read from the spec (CUser)."""
    nuser = -1
    for size in ctx.spec.root.find("size"):
        if size.has(f"nuser_{kind}"):
            nuser = size.get(f"nuser_{kind}")
    return build.user_array(users, elements, nuser, kind)


def _transmission(ctx: Context, rec: _Record, el: Element) -> tuple[int, int, int]:
    trntype, target, ref = None, -1, -1
    for attr, kind, objkind in _TRN_ATTRS:
        if el.has(attr):
            trntype = kind
            target = ctx.lookup(objkind, el.get(attr), el, attr)
    if trntype is None:
        raise el.error("missing transmission target (joint, jointinparent, tendon, "
                       "cranksite, site or body)")
    if el.has("refsite"):
        if trntype != TrnType.SITE:
            raise el.error("refsite can only be used with site transmission")
        ref = ctx.lookup("site", el.get("refsite"), el, "refsite")
    if el.has("slidersite"):
        if trntype != TrnType.SLIDERCRANK:
            raise el.error("cranklength and slidersite can only be used in slidercrank "
                           "transmission")
        ref = ctx.lookup("site", el.get("slidersite"), el, "slidersite")
    if trntype == TrnType.SLIDERCRANK:
        if ref < 0:
            raise el.error("missing slidersite for slider-crank transmission")
        if rec.scalar["cranklength"] <= 0:
            raise el.error("crank length must be positive for slider-crank transmission")
    return int(trntype), target, ref


def _target_range(ctx: Context, trntype: int, target: int, el: Element) -> np.ndarray:
    """The joint or tendon range an inheritrange actuator copies (``position/inheritrange``)."""
    f = ctx.fields
    if trntype in (TrnType.JOINT, TrnType.JOINTINPARENT):
        rng, limited = f["jnt_range"][target], f["jnt_limited"][target]
    elif trntype == TrnType.TENDON:
        rng, limited = f["tendon_range"][target], f["tendon_limited"][target]
    else:
        raise el.error("inheritrange requires a joint or tendon transmission")
    if not limited and not rng[0] < rng[1]:
        raise el.error("inheritrange used but the target has no range defined")
    return np.asarray(rng, dtype=float)


def _lengthrange(ctx: Context, rec: _Record, trntype: int, target: int) -> tuple[np.ndarray,
                                                                               bool]:
    """Compile-time lengthrange where numpy can give it (``compiler/lengthrange``).

    Returns (range, pending): pending when the compile-time simulation is needed.
    """
    lr = rec.vec["lengthrange"].copy()
    opts = {"mode": "muscle", "useexisting": "true", "uselimit": "false"}
    for el in ctx.spec.root.find("compiler"):
        for lre in el.find("lengthrange"):
            for k in opts:
                if lre.has(k):
                    opts[k] = lre.get(k)
    mode = opts["mode"]
    # Muscle gain or bias; muscle activation dynamics alone do not count (measured on 4.0).
    is_muscle = rec.gaintype == GainType.MUSCLE or rec.biastype == BiasType.MUSCLE
    is_user = rec.gaintype == GainType.USER or rec.biastype == BiasType.USER
    wanted = (mode == "all" or (mode in ("muscle", "muscleuser") and is_muscle)
              or (mode == "muscleuser" and is_user))
    if not wanted:
        return lr, False
    if opts["useexisting"] == "true" and lr[0] < lr[1]:
        return lr, False
    f = ctx.fields
    if opts["uselimit"] == "true":
        # The target's range is copied as is, gear not applied (measured on MuJoCo 4.0).
        if trntype in (TrnType.JOINT, TrnType.JOINTINPARENT):
            jtype = int(f["jnt_type"][target])
            if f["jnt_limited"][target] and jtype in (2, 3):
                return np.array(f["jnt_range"][target], dtype=float), False
        if trntype == TrnType.TENDON and f["tendon_limited"][target]:
            return np.array(f["tendon_range"][target], dtype=float), False
    return lr, True


def _length0(ctx: Context, trntype: int, target: int, ref: int, gear) -> float | None:
    """Actuator length at qpos0 where numpy gives it exactly, else None (set_const).

    Joint: gear * qpos0 for hinge/slide, 0 for ball/free (identity rotation, free length
    defined 0); tendon: gear * tendon_length0; site without refsite and body: 0
    (``actuator/general/joint|site|body``).
    """
    f = ctx.fields
    if trntype in (TrnType.JOINT, TrnType.JOINTINPARENT):
        jtype = int(f["jnt_type"][target])
        if jtype in (2, 3):
            return float(gear[0] * f["qpos0"][int(f["jnt_qposadr"][target])])
        return 0.0
    if trntype == TrnType.TENDON:
        exact = f.get("_tendon_length0_exact")
        if exact is None or not exact[target]:
            return None
        return float(gear[0] * f["tendon_length0"][target])
    if (trntype == TrnType.SITE and ref < 0) or trntype == TrnType.BODY:
        return 0.0
    return None


def build_actuators(ctx: Context) -> dict:
    """nu, na and the actuator_* fields (plus jnt/tendon_actuatorid) in document order.

    ``_pending`` lists fields that need the dynamics at qpos0 (``set_const``):
    actuator_acc0 always; actuator_length0 when a transmission needs kinematics (slider-crank,
    site with refsite, wrapping tendon); actuator_biasprm where a dampratio is stored
    positive; actuator_lengthrange where a compile-time length-range simulation is needed.
    """
    elements = ctx.spec.section("actuator")
    nu = len(elements)
    f = ctx.fields
    out = {
        "actuator_trntype": np.zeros(nu, np.int32), "actuator_dyntype": np.zeros(nu, np.int32),
        "actuator_gaintype": np.zeros(nu, np.int32), "actuator_biastype": np.zeros(nu, np.int32),
        "actuator_trnid": np.full((nu, 2), -1, np.int32),
        "actuator_actadr": np.full(nu, -1, np.int32), "actuator_actnum": np.zeros(nu, np.int32),
        "actuator_group": np.zeros(nu, np.int32),
        "actuator_ctrladr": np.arange(nu, dtype=np.int32),
        "actuator_ctrlnum": np.ones(nu, np.int32),
        "actuator_ctrlspec": np.zeros(nu, np.int32),
        "actuator_outadr": np.arange(nu, dtype=np.int32),
        "actuator_outnum": np.ones(nu, np.int32),
        "actuator_ctrllimited": np.zeros(nu, bool), "actuator_forcelimited": np.zeros(nu, bool),
        "actuator_actlimited": np.zeros(nu, bool), "actuator_actearly": np.zeros(nu, bool),
        "actuator_dynprm": np.zeros((nu, NPRM)), "actuator_gainprm": np.zeros((nu, NPRM)),
        "actuator_biasprm": np.zeros((nu, NPRM)), "actuator_ctrlrange": np.zeros((nu, 2)),
        "actuator_forcerange": np.zeros((nu, 2)), "actuator_actrange": np.zeros((nu, 2)),
        "actuator_gear": np.zeros((nu, 6)), "actuator_cranklength": np.zeros(nu),
        "actuator_acc0": np.zeros(nu), "actuator_length0": np.zeros(nu),
        "actuator_lengthrange": np.zeros((nu, 2)), "actuator_delay": np.zeros(nu),
        "actuator_damping": np.zeros(nu), "actuator_dampingpoly": np.zeros((nu, 2)),
        "actuator_armature": np.zeros(nu),
    }
    pending: set[str] = set()
    length_exact = np.ones(nu, bool)
    simulate_range = []  # actuators whose lengthrange needs the compile-time simulation
    users = []
    na = 0
    njnt = int(f.get("njnt", len(f.get("jnt_type", ()))))
    ntendon = int(f.get("ntendon", 0))
    jnt_act = np.full(njnt, -1, np.int32)
    ten_act = np.full(ntendon, -1, np.int32)
    for i, el in enumerate(elements):
        ctx.register("actuator", el)
        rec = _record(ctx, el)
        if rec.nsample > 0 or rec.scalar["delay"] > 0:
            if rec.nsample <= 0:
                raise el.error("setting delay > 0 without a history buffer (nsample)")
            raise el.error("unsupported: actuator history buffers (nsample, delay) are not "
                           "implemented by mjx_lite")
        if rec.spec and rec.gaintype in (GainType.MUSCLE, GainType.USER):
            raise el.error("input is not available for muscle and user gains")
        trntype, target, ref = _transmission(ctx, rec, el)
        out["actuator_trntype"][i] = trntype
        out["actuator_trnid"][i] = (target, ref)
        out["actuator_dyntype"][i] = rec.dyntype
        out["actuator_gaintype"][i] = rec.gaintype
        out["actuator_biastype"][i] = rec.biastype
        out["actuator_dynprm"][i] = rec.dynprm
        out["actuator_gainprm"][i] = rec.gainprm
        out["actuator_biasprm"][i] = rec.biasprm
        out["actuator_ctrlspec"][i] = rec.spec
        out["actuator_group"][i] = rec.group
        out["actuator_actearly"][i] = rec.actearly
        for name in ("ctrlrange", "forcerange", "actrange", "gear"):
            out[f"actuator_{name}"][i] = rec.vec[name]
        out["actuator_cranklength"][i] = rec.scalar["cranklength"]
        out["actuator_armature"][i] = rec.scalar["armature"]
        out["actuator_damping"][i] = rec.vec["damping"][0]
        out["actuator_dampingpoly"][i] = rec.vec["damping"][1:]
        # Transmission targets carrying this actuator's damping/armature: one id, or -2 when
        # several actuators contribute (mjModel jnt_actuatorid / tendon_actuatorid).
        if rec.scalar["armature"] != 0 or np.any(rec.vec["damping"] != 0):
            if trntype in (TrnType.JOINT, TrnType.JOINTINPARENT):
                jnt_act[target] = i if jnt_act[target] == -1 else -2
            elif trntype == TrnType.TENDON:
                ten_act[target] = i if ten_act[target] == -1 else -2

        # inheritrange acts on position-like actuators only (and is silently unused on
        # others); a position-like one with other dynamics is an error (measured on 4.0).
        if rec.inheritrange > 0 and _position_like(rec, (GainType.FIXED,)):
            if rec.dyntype not in (DynType.NONE, DynType.FILTEREXACT, DynType.INTEGRATOR):
                raise el.error("inheritrange only available for position and intvelocity "
                               "actuators")
            rng = _target_range(ctx, trntype, target, el)
            mid, half = rng.mean(), rec.inheritrange * (rng[1] - rng[0]) / 2
            if rec.dyntype == DynType.INTEGRATOR:
                out["actuator_actrange"][i] = (mid - half, mid + half)
                rec.vec["actrange"] = out["actuator_actrange"][i].copy()
                rec.has.add("actrange")
            else:
                out["actuator_ctrlrange"][i] = (mid - half, mid + half)
                rec.vec["ctrlrange"] = out["actuator_ctrlrange"][i].copy()
                rec.has.add("ctrlrange")
        for flag, rng in (("ctrllimited", "ctrlrange"), ("forcelimited", "forcerange"),
                          ("actlimited", "actrange")):
            limited = _limited(ctx, rec, el, flag, rng)
            lo, hi = rec.vec[rng]
            if flag == "actlimited" and rec.tag == "intvelocity":
                # intvelocity limits its activation exactly when actrange is a valid range,
                # whatever actlimited says (measured on MuJoCo 4.0)
                limited = bool(lo < hi)
            out[f"actuator_{flag}"][i] = limited
            if limited and not lo < hi and not (flag == "forcelimited" and lo <= hi):
                what = {"ctrllimited": "control", "forcelimited": "force",
                        "actlimited": "activation"}[flag]
                raise el.error(f"invalid {what} range {lo:g} {hi:g}")
        if out["actuator_actlimited"][i] and rec.dyntype == DynType.NONE:
            raise el.error("actrange specified but dyntype is 'none'")
        if rec.tag in ("damper", "adhesion") and rec.vec["ctrlrange"].min() < 0:
            raise el.error(f"{rec.tag} control range cannot be negative")

        # Activation states: one for stateful dynamics unless actdim says otherwise
        # (``actuator/general/actdim``).
        actnum = 0 if rec.dyntype == DynType.NONE else 1
        if rec.actdim >= 0:
            if rec.dyntype != DynType.NONE and rec.actdim == 0:
                raise el.error("invalid actdim 0 in stateful actuator")
            if rec.actdim > 1 and rec.dyntype != DynType.USER:
                raise el.error("actdim > 1 is only allowed for dyntype 'user'")
            actnum = rec.actdim
        if actnum:
            out["actuator_actadr"][i] = na
            out["actuator_actnum"][i] = actnum
            na += actnum

        # A positive biasprm[2] is a dampratio wherever gainprm[0] = -biasprm[1], whatever
        # the bias type (measured on MuJoCo 4.0).
        if (rec.biasprm[2] > 0 and rec.gainprm[0] == -rec.biasprm[1]
                and rec.gaintype in (GainType.FIXED, GainType.AFFINE)):
            pending.add("actuator_biasprm")  # dampratio -> kv at qpos0 (position/dampratio)
        for kind, prm in ((rec.gaintype, rec.gainprm), (rec.biastype, rec.biasprm)):
            if kind != GainType.MUSCLE:  # GainType.MUSCLE == BiasType.MUSCLE == 2
                continue
            if not prm[0] < prm[1]:
                raise el.error("muscle range[0] < range[1] required")
            if not prm[4] < 1 < prm[5]:
                raise el.error("muscle lmin < 1 < lmax required")
        length0 = _length0(ctx, trntype, target, ref, rec.vec["gear"])
        if length0 is None:
            length_exact[i] = False
        else:
            out["actuator_length0"][i] = length0
        lr, lr_pending = _lengthrange(ctx, rec, trntype, target)
        out["actuator_lengthrange"][i] = lr
        if lr_pending:
            pending.add("actuator_lengthrange")
            simulate_range.append(i)
        users.append(rec.user)
    out["actuator_user"] = user_array(ctx, "actuator", users, elements)
    out["nuser_actuator"] = out["actuator_user"].shape[1]
    out["nu"] = nu
    out["na"] = na
    out["jnt_actuatorid"] = jnt_act
    out["tendon_actuatorid"] = ten_act
    if nu:
        pending.add("actuator_acc0")
    if not np.all(length_exact):
        pending.add("actuator_length0")
    out["_pending"] = sorted(pending)
    ctx.fields.update({k: v for k, v in out.items() if k != "_pending"})
    ctx.lengthrange_actuators = simulate_range
    return out
