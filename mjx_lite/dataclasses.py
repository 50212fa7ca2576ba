"""The pytree base class shared by Model, Option, Statistic, Data and Contact.

One rule decides what is traced: a field annotated ``jax.Array`` (or another
``PyTreeNode`` class) is a pytree child, so ``jit``/``vmap``/``grad`` see it;
every other field (ints, enums, tuples, host numpy arrays) is static treedef
metadata. Static numpy arrays are wrapped so that the treedef hashes once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax
import numpy as np

_T = TypeVar("_T", bound="PyTreeNode")
_NODE_CLASSES: set[str] = set()


class _StaticArray:
    """Hashable, immutable wrapper of a host numpy array kept in treedef metadata."""

    __slots__ = ("array", "_hash")

    def __init__(self, array: np.ndarray):
        array = np.asarray(array)
        array.setflags(write=False)
        self.array = array
        self._hash = hash((array.shape, array.dtype.str, array.tobytes()))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _StaticArray) or self._hash != other._hash:
            return False
        return self.array.dtype == other.array.dtype and np.array_equal(self.array, other.array)


def _wrap(value: Any) -> Any:
    return _StaticArray(value) if isinstance(value, np.ndarray) else value


def _unwrap(value: Any) -> Any:
    return value.array if isinstance(value, _StaticArray) else value


def _is_traced(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    text = text.replace("'", "").strip()
    return text.startswith("jax.Array") or text.split("|")[0].strip() in _NODE_CLASSES


class PyTreeNode:
    """Frozen dataclass registered as a pytree (see module docstring for the rule)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _NODE_CLASSES.add(cls.__name__)
        dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)
        fields = dataclasses.fields(cls)
        children = tuple(f.name for f in fields if _is_traced(f.type))
        static = tuple(f.name for f in fields if not _is_traced(f.type))
        cls._tree_children = children
        cls._tree_static = static

        def flatten_with_keys(node):
            kids = tuple((jax.tree_util.GetAttrKey(n), getattr(node, n)) for n in children)
            aux = tuple(_wrap(getattr(node, n)) for n in static)
            return kids, aux

        def flatten(node):
            return tuple(getattr(node, n) for n in children), tuple(
                _wrap(getattr(node, n)) for n in static
            )

        def unflatten(aux, kids):
            obj = object.__new__(cls)
            for n, v in zip(children, kids):
                object.__setattr__(obj, n, v)
            for n, v in zip(static, aux):
                object.__setattr__(obj, n, _unwrap(v))
            return obj

        jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)

    def replace(self: _T, **changes: Any) -> _T:
        """Returns a copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)

    def fields(self) -> tuple[str, ...]:
        """Names of all fields, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(self))

    def __repr__(self) -> str:
        parts = []
        for name in self.fields():
            value = getattr(self, name)
            if hasattr(value, "shape") and hasattr(value, "dtype"):
                parts.append(f"{name}={value.dtype}{list(value.shape)}")
            elif isinstance(value, PyTreeNode):
                parts.append(f"{name}={type(value).__name__}(...)")
            else:
                text = repr(value)
                parts.append(f"{name}={text if len(text) < 40 else text[:37] + '...'}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __reduce__(self):
        # Pickle by field values so frozen instances with wrapped statics round-trip.
        return (_rebuild, (type(self), {n: getattr(self, n) for n in self.fields()}))


def _rebuild(cls, values):
    obj = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(obj, name, value)
    return obj
