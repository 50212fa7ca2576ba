"""mjx_lite: MuJoCo's model and pipeline in pure, jit/vmap/grad-able JAX."""

from mjx_lite.collision.driver import contacts_to_numpy
from mjx_lite.compiler.assemble import load_model, load_model_from_string
from mjx_lite.derivative import transition_jacobians
from mjx_lite.errors import MJCFError
from mjx_lite.forward import forward, inverse, step
from mjx_lite.io import make_data
from mjx_lite.ray import ray
from mjx_lite.rollout import rollout
from mjx_lite.smooth import rne_post_constraint
from mjx_lite.support import contact_force, full_m, id2name, name2id
from mjx_lite.types import (
    BiasType,
    ConeType,
    Data,
    DisableBit,
    DynType,
    EnableBit,
    GainType,
    GeomType,
    IntegratorType,
    JointType,
    Model,
    ObjType,
    Option,
    SensorType,
    SolverType,
    Statistic,
    TrnType,
)
from mjx_lite.xla import compiler_options

__version__ = "0.1.0"

__all__ = [
    "BiasType", "ConeType", "Data", "DisableBit", "DynType", "EnableBit", "GainType",
    "GeomType", "IntegratorType", "JointType", "MJCFError", "Model", "ObjType", "Option",
    "SensorType", "SolverType", "Statistic", "TrnType", "__version__", "compiler_options",
    "contact_force", "contacts_to_numpy",
    "forward", "full_m", "rne_post_constraint",
    "id2name", "inverse", "load_model", "load_model_from_string", "make_data", "name2id",
    "ray", "rollout", "step", "transition_jacobians",
]


def __getattr__(name: str):
    # mjx_lite.envs loads on first use so that ``import mjx_lite`` stays light
    if name == "envs":
        import importlib

        return importlib.import_module("mjx_lite.envs")
    raise AttributeError(f"module 'mjx_lite' has no attribute {name!r}")
