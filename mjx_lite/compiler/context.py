"""The compile context shared by the builder passes: ids by name, fields built so far."""

from __future__ import annotations

import dataclasses

import numpy as np

from mjx_lite.compiler.parse import Element, Spec


@dataclasses.dataclass
class Context:
    """State passed from the kinematic-tree pass to the element passes (tendons, actuators...).

    ``fields`` holds mjModel-named numpy arrays and ints built so far (``body_parentid``,
    ``jnt_type``, ``jnt_qposadr``, ``jnt_dofadr``, ``dof_bodyid``, ``nq``, ``nv``, ``qpos0``,
    ``site_bodyid``, ``geom_bodyid``, ...). A pass reads what it needs and adds its own fields.
    ``ids[kind][name]`` maps names to ids; kinds follow ``interop.NAME_KINDS``.
    ``elements[kind]`` lists the Element of each id (the world body is None).
    """

    spec: Spec
    fields: dict = dataclasses.field(default_factory=dict)
    ids: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    elements: dict[str, list] = dataclasses.field(default_factory=dict)
    names: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    angle_scale: float = np.pi / 180.0  # compiler angle="degree" (default) -> radians
    euler_seq: str = "xyz"
    autolimits: bool = True
    lengthrange_actuators: list = dataclasses.field(default_factory=list)

    def register(self, kind: str, el: Element | None, name: str | None = None) -> int:
        """Appends an object of ``kind``; returns its id. Duplicate names are an error."""
        names = self.names.setdefault(kind, [])
        elements = self.elements.setdefault(kind, [])
        ids = self.ids.setdefault(kind, {})
        name = (el.attrs.get("name", "") if el is not None else "") if name is None else name
        if name:
            if name in ids:
                raise el.error(f"repeated name '{name}' in {kind}")
            ids[name] = len(names)
        names.append(name)
        elements.append(el)
        return len(names) - 1

    def lookup(self, kind: str, name: str, el: Element, attr: str) -> int:
        """Id of the named object, or an MJCFError naming the referring element."""
        try:
            return self.ids.get(kind, {})[name]
        except KeyError:
            raise el.error(f"attribute '{attr}' refers to unknown {kind} '{name}'") from None

    def limited(self, el: Element, flag: str, range_attr: str) -> bool:
        """Resolves a [false, true, auto] limit flag with compiler autolimits (seed F0:535)."""
        value = el.get(flag, "auto")
        if value == "auto":
            if not self.autolimits and el.has(range_attr):
                raise el.error(f"attribute '{range_attr}' is set without '{flag}' while "
                               "compiler autolimits is false")
            return self.autolimits and el.has(range_attr)
        return value == "true"
