"""mjx_lite: MuJoCo's model and pipeline in pure, jit/vmap/grad-able JAX."""

from mjx_lite.compiler.assemble import load_model, load_model_from_string
from mjx_lite.errors import MJCFError
from mjx_lite.forward import forward, inverse, step
from mjx_lite.io import make_data
from mjx_lite.support import full_m, id2name, name2id
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

__version__ = "0.1.0"

__all__ = [
    "BiasType", "ConeType", "Data", "DisableBit", "DynType", "EnableBit", "GainType",
    "GeomType", "IntegratorType", "JointType", "MJCFError", "Model", "ObjType", "Option",
    "SensorType", "SolverType", "Statistic", "TrnType", "__version__", "forward", "full_m",
    "id2name", "inverse", "load_model", "load_model_from_string", "make_data", "name2id", "step",
]
