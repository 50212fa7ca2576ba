"""XLA compile options that suit mjx_lite's programs.

A step is hundreds of small kernels (a few to a few thousand numbers each), and on CPU two of
XLA's newer code paths cost more than they save on kernels that small:

- the MLIR fusion emitters (``xla_cpu_use_fusion_emitters``): the older elemental emitter
  compiles mjx_lite's loop fusions faster and runs them faster;
- YNNPACK library fusions (``xla_cpu_experimental_ynn_fusion_type``), to which jaxlib 0.10
  hands dots and multiply-reduce fusions: a library call costs more than the few hundred
  multiply-adds of a contact Jacobian product.

Measured on a 2-core CPU, gymnasium humanoid, 100 steps, Newton at 1 iteration, float32, in
one process (``docs/gradients.md``, "Session 55"): forward rollout at batch 1 about equal,
its implicit-adjoint gradient 388 -> 312 ms; batch 64 (25 steps) forward 1,386 -> 1,243 ms,
gradient 3,733 -> 3,258 ms; jit seconds 26-45% fewer (gradient 44.7 -> 24.4 s).

Use: ``jax.jit(fn, compiler_options=mjx_lite.compiler_options())``. Results differ from the
default options' at rounding level only (XLA orders some float sums differently).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp

# option -> value, for the CPU backend; an option the installed jaxlib does not know is left
# out (XLA rejects unknown options, and these two are experimental)
_CPU_OPTIONS = {
    "xla_cpu_use_fusion_emitters": False,
    "xla_cpu_experimental_ynn_fusion_type": "",
}


@functools.cache
def _known(backend: str, name: str, value) -> bool:
    cpu = jax.devices(backend)[0]
    try:
        jax.jit(lambda x: x + 1).lower(jax.device_put(jp.zeros(2), cpu)).compile(
            compiler_options={name: value})
    except Exception:  # noqa: BLE001 - XLA reports an unknown option as a runtime error
        return False
    return True


def compiler_options(backend: str | None = None) -> dict:
    """The compile options mjx_lite recommends for ``backend`` (default: JAX's default
    backend), to pass as ``jax.jit(..., compiler_options=...)``: on CPU those of this module's
    docstring that the installed jaxlib accepts; elsewhere none (an empty dict)."""
    backend = backend or jax.default_backend()
    if backend != "cpu":
        return {}
    return {k: v for k, v in _CPU_OPTIONS.items() if _known(backend, k, v)}
