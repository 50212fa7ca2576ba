"""Actuator length ranges by the compile-time simulation of compiler/lengthrange.

XML reference, compiler/lengthrange, and the Modeling chapter, "Length range": for each actuator
and each direction, start at qpos0 and push through the actuator's transmission with a force
scaled so that the joint-space acceleration has norm ``accel`` (capped by ``maxforce``), with
contacts, passive forces, gravity, friction loss and actuation off, joint and tendon limits on,
and the velocity damped with time constant ``timeconst``. After ``inttotal`` seconds, the
extreme length over the last ``interval`` seconds is the bound; if the length still moves by
more than ``tolrange`` of the range over that interval, the model is rejected as MuJoCo does.

All actuators and both directions run as one batch under ``jax.vmap`` of a ``lax.scan``, so a
model compiles one XLA program however many muscles it has.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.compiler.parse import Spec
from mjx_lite.errors import MJCFError
from mjx_lite.math import where
from mjx_lite.types import DisableBit, IntegratorType, Model

_DEFAULTS = {"accel": 20.0, "maxforce": 0.0, "timeconst": 1.0, "timestep": 0.01,
             "inttotal": 10.0, "interval": 2.0, "tolrange": 0.05}
_OFF = (DisableBit.CONTACT | DisableBit.SPRING | DisableBit.DAMPER | DisableBit.GRAVITY |
        DisableBit.FRICTIONLOSS | DisableBit.ACTUATION)


def settings(spec: Spec) -> dict:
    out = dict(_DEFAULTS)
    for el in spec.root.find("compiler"):
        for lre in el.find("lengthrange"):
            for key in out:
                if lre.has(key):
                    out[key] = float(lre.get(key))
    return out


def compute(m: Model, actuators: list[int], opts: dict, location: str) -> np.ndarray:
    """(len(actuators), 2) simulated length ranges, in the order given."""
    from mjx_lite import smooth
    from mjx_lite.forward import forward, integrate
    from mjx_lite.io import make_data

    timestep = opts["timestep"] if opts["timestep"] > 0 else float(m.opt.timestep)
    msim = m.replace(opt=m.opt.replace(timestep=jp.asarray(timestep, dtype=float),
                                       integrator=IntegratorType.EULER,
                                       disableflags=m.opt.disableflags | _OFF))
    nstep = int(round(opts["inttotal"] / timestep))
    nrecord = max(int(round(opts["interval"] / timestep)), 1)
    damp = float(np.exp(-timestep / opts["timeconst"]))
    d0 = make_data(msim)

    def push(actuator, sign):
        def body(carry, k):
            d, force = carry
            d = forward(msim, d.replace(qfrc_applied=force))
            moment = d.actuator_moment[actuator]
            acc = smooth.solve_m(msim, d, moment)
            scale = opts["accel"] / jp.maximum(jp.linalg.norm(acc), 1e-15)
            if opts["maxforce"] > 0:
                scale = jp.minimum(scale, opts["maxforce"])
            length = d.actuator_length[actuator]
            d = integrate(msim, d)
            d = d.replace(qvel=d.qvel * damp)
            return (d, sign * scale * moment), where(k >= nstep - nrecord, length, jp.nan)

        init = (d0, jp.zeros(msim.nv, dtype=d0.qvel.dtype))
        _, lengths = jax.lax.scan(body, init, jp.arange(nstep))
        return lengths

    ids = jp.asarray(np.repeat(np.asarray(actuators, dtype=np.int32), 2))
    signs = jp.asarray(np.tile([-1.0, 1.0], len(actuators)))
    lengths = np.asarray(jax.jit(jax.vmap(push))(ids, signs))
    out = np.zeros((len(actuators), 2))
    for k, actuator in enumerate(actuators):
        low, high = lengths[2 * k], lengths[2 * k + 1]
        out[k] = [np.nanmin(low), np.nanmax(high)]
        span = out[k, 1] - out[k, 0]
        spread = max(np.nanmax(low) - np.nanmin(low), np.nanmax(high) - np.nanmin(high))
        if not np.isfinite(span) or span <= 0 or spread > opts["tolrange"] * span:
            raise MJCFError(f"{location} length range computation did not converge for actuator "
                            f"{actuator}: add joint or tendon limits, or set its lengthrange")
    return out
