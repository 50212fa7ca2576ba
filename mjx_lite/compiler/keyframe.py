"""Keyframes -> key_*, and custom numeric/text -> numeric_data / text_data.

XML reference (MuJoCo 4.0 wheel, ``doc/XMLreference.rst``), sections ``keyframe/key`` and
``custom``. A key's vectors may be shorter than their full size: the given values fill the
leading entries and the rest keep the defaults, qpos0 for qpos, the mocap bodies' poses for
mpos/mquat and zeros otherwise (measured against ``mujoco==4.0.0``).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.compiler.context import Context
from mjx_lite.types import JointType


def _fill(el, attr: str, default: np.ndarray) -> np.ndarray:
    out = np.array(default, dtype=float).reshape(-1).copy()
    if not el.has(attr):
        return out
    value = np.atleast_1d(np.asarray(el.get(attr), dtype=float))
    if value.size > out.size:
        raise el.error(f"attribute '{attr}' has {value.size} values, more than the model's "
                       f"{out.size}")
    out[: value.size] = value
    return out


def build_keyframes(ctx: Context) -> dict:
    """nkey and key_time, key_qpos, key_qvel, key_act, key_ctrl, key_mpos, key_mquat."""
    f = ctx.fields
    keys = ctx.spec.section("keyframe")
    nq, nv = int(f["nq"]), int(f["nv"])
    nu, na = int(f.get("nu", 0)), int(f.get("na", 0))
    mocapid = np.asarray(f["body_mocapid"])
    mocap_bodies = np.argsort(np.where(mocapid >= 0, mocapid, np.iinfo(np.int32).max))
    mocap_bodies = mocap_bodies[: int((mocapid >= 0).sum())]
    mpos0 = np.asarray(f["body_pos"], float)[mocap_bodies].reshape(-1)
    mquat0 = np.asarray(f["body_quat"], float)[mocap_bodies].reshape(-1)
    # size/nkey allocates keyframes; those not written keep the defaults (size/nkey).
    nk = len(keys)
    for size in ctx.spec.root.find("size"):
        if size.has("nkey"):
            nk = max(nk, int(size.get("nkey")))
    out = {
        "key_time": np.zeros(nk), "key_qpos": np.zeros((nk, nq)),
        "key_qvel": np.zeros((nk, nv)), "key_act": np.zeros((nk, na)),
        "key_ctrl": np.zeros((nk, nu)), "key_mpos": np.zeros((nk, mpos0.size)),
        "key_mquat": np.zeros((nk, mquat0.size)),
    }
    for k in range(len(keys), nk):
        out["key_qpos"][k] = f["qpos0"]
        out["key_mpos"][k] = mpos0
        out["key_mquat"][k] = mquat0
    for k, el in enumerate(keys):
        ctx.register("key", el)
        out["key_time"][k] = el.get("time", 0.0)
        qpos = _fill(el, "qpos", f["qpos0"])
        # Free and ball joint quaternions are normalized, as the compiler does for qpos0.
        for jtype, adr in zip(f["jnt_type"], f["jnt_qposadr"], strict=True):
            if jtype in (JointType.FREE, JointType.BALL):
                start = int(adr) + (3 if jtype == JointType.FREE else 0)
                norm = np.linalg.norm(qpos[start:start + 4])
                if norm < 1e-15:
                    raise el.error("attribute 'qpos' has a zero joint quaternion")
                qpos[start:start + 4] /= norm
        out["key_qpos"][k] = qpos
        out["key_qvel"][k] = _fill(el, "qvel", np.zeros(nv))
        out["key_act"][k] = _fill(el, "act", np.zeros(na))
        out["key_ctrl"][k] = _fill(el, "ctrl", np.zeros(nu))
        out["key_mpos"][k] = _fill(el, "mpos", mpos0)
        mquat = _fill(el, "mquat", mquat0).reshape(-1, 4)
        norms = np.linalg.norm(mquat, axis=1)
        if np.any(norms < 1e-15):
            raise el.error("attribute 'mquat' has a zero quaternion")
        out["key_mquat"][k] = (mquat / norms[:, None]).reshape(-1)
        if el.has("plastic") and np.asarray(el.get("plastic")).size:
            raise el.error("unsupported: plastic state (tendon springyield) is not "
                           "implemented by mjx_lite")
    for _ in range(len(keys), nk):
        ctx.register("key", None, name="")  # keys reserved by size/nkey are unnamed
    out["nkey"] = nk
    ctx.fields.update(out)
    return out


def build_custom(ctx: Context) -> dict:
    """nnumeric, numeric_data (tuple of tuples), ntext, text_data (tuple of str)."""
    numeric, text = [], []
    for el in ctx.spec.section("custom"):
        if el.tag == "numeric":
            ctx.register("numeric", el)
            data = np.atleast_1d(np.asarray(el.get("data", ()), dtype=float))
            size = el.get("size", data.size)
            if size <= 0:
                raise el.error("custom numeric size must be positive")
            if data.size > size:
                raise el.error(f"attribute 'data' has {data.size} values, more than size "
                               f"{size}")
            values = np.zeros(size)
            values[: data.size] = data
            numeric.append(tuple(float(v) for v in values))
        elif el.tag == "text":
            ctx.register("text", el)
            text.append(el.get("data"))
        else:
            raise el.error("unsupported: custom tuple is not implemented by mjx_lite")
    out = {"nnumeric": len(numeric), "numeric_data": tuple(numeric),
           "ntext": len(text), "text_data": tuple(text)}
    ctx.fields.update(out)
    return out
