"""The compiler's numpy constants at qpos0 equal the differentiable JAX set_const."""

from __future__ import annotations

import numpy as np
import pytest

import mjx_lite
from mjx_lite.const import set_const

from conftest import GYM_ASSETS, MJX_TEST_DATA
from parity import assert_close

FIELDS = ("dof_M0", "dof_invweight0", "body_invweight0", "tendon_invweight0", "actuator_acc0")


# pusher (the slowest) in the acceptance tier
@pytest.mark.parametrize("path", [GYM_ASSETS / "reacher.xml",
                                  pytest.param(GYM_ASSETS / "pusher.xml",
                                               marks=pytest.mark.acceptance),
                                  MJX_TEST_DATA / "tendon" / "fixed.xml",
                                  MJX_TEST_DATA / "tendon" / "armature.xml"],
                         ids=lambda p: p.name)
def test_numpy_constants_match_set_const(path):
    m = mjx_lite.load_model(path)
    again = set_const(m, meaninertia=True)
    for name in FIELDS:
        assert_close(name, np.asarray(getattr(again, name)), np.asarray(getattr(m, name)), 1e-10)
    assert_close("meaninertia", again.stat.meaninertia, m.stat.meaninertia, 1e-10)
