"""MJCF text -> validated element tree with include splicing and default classes resolved.

Seed ``000_14f7d172c1a5ccbe.txt``: XML schema, include (L419), default (L2549), attribute types
(L344). The schema itself is MuJoCo 4.0's (``schema.py``, generated). Every error is an
``MJCFError`` that starts with ``file:line: <element name="...">``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Any

import numpy as np
from lxml import etree

from mjx_lite.compiler.schema import SCHEMA
from mjx_lite.errors import MJCFError

STRING_FILE = "<string>"

# Elements MuJoCo 4.0 accepts that mjx_lite does not implement (fail loudly, never ignore).
UNSUPPORTED = {
    "replicate": "replicate", "attach": "attach",
    "flexcomp": "flexcomp", "deformable": "deformable (flex)", "skin": "skin",
    "plugin": "plugins", "extension": "plugins", "instance": "plugins",
    "model": "asset/model (attach)", "flex": "flex", "dcmotor": "dcmotor actuator",
    "pid": "pid actuator", "orientation": "orientation (SO3) actuator",
}

# Numbers as MuJoCo 4.0 reads them (measured; see scripts/gen_schema.py): reals are C strtod
# numbers (inf, nan and hex floats included), ints are signed decimals within int32.
_REAL = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan|"
                   r"0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?\d+)?)", re.IGNORECASE)
_INT = re.compile(r"[+-]?\d+")
_INT_MAX = 2**31 - 1
_FLOAT_MAX = 3.4028234663852886e38  # attributes MuJoCo stores in single precision
# Attributes MuJoCo 4.0's schema leaves optional but its compiler then demands.
_COMPILE_REQUIRED = {"pair": ("geom1", "geom2")}
# String attributes with a format of their own (measured against 4.0).
_FORMATS = {("size", "memory"): (re.compile(r"\s*(?:-1|\d+[KMGTPE]?)\s*", re.IGNORECASE),
                                 "an unsigned integer with an optional K/M/G/T/P/E suffix")}
# Polynomial attributes in MuJoCo 4.0 ("linear quadratic cubic"), documented as scalars before.
_POLYNOMIAL = ("stiffness", "damping")
# Elements MuJoCo 4.0 refuses directly inside the world body (or a frame in it).
_NOT_IN_WORLD = {"joint": "joints", "freejoint": "joints", "inertial": "inertia"}

# Where an element's defaults come from: (parent tag, tag) -> tag under <default>.
_ACTUATOR_TAGS = ("general", "motor", "position", "velocity", "intvelocity", "damper",
                  "cylinder", "muscle", "adhesion", "dcmotor", "pid", "orientation")


def default_tag(parent: str | None, tag: str) -> str | None:
    """The <default> child that supplies this element's defaults, or None."""
    if parent in ("body", "worldbody", "frame") and tag in ("joint", "geom", "site", "camera",
                                                             "light"):
        return tag
    if parent == "asset" and tag in ("mesh", "material", "texture"):
        return tag
    if parent == "contact" and tag == "pair":
        return "pair"
    if parent == "equality":
        return "equality"
    if parent == "tendon" and tag in ("spatial", "fixed"):
        return "tendon"
    if parent == "actuator" and tag in _ACTUATOR_TAGS:
        return tag
    return None


@dataclasses.dataclass(eq=False)
class Element:
    """One MJCF element: its own attributes (as written), location and schema node."""

    tag: str
    attrs: dict[str, str]
    file: str
    line: int
    schema: dict
    parent: Element | None = None
    children: list[Element] = dataclasses.field(default_factory=list)
    cls: str = "main"  # resolved default class
    defaults: dict[str, str] = dataclasses.field(default_factory=dict)  # from the class

    def where(self) -> str:
        name = self.attrs.get("name")
        label = f'<{self.tag} name="{name}">' if name else f"<{self.tag}>"
        return f"{os.path.basename(self.file)}:{self.line}: {label}"

    def error(self, message: str) -> MJCFError:
        return MJCFError(f"{self.where()} {message}")

    def find(self, tag: str) -> list[Element]:
        return [c for c in self.children if c.tag == tag]

    # -- attribute access (defaults merged, typed by the schema) --------------------------
    def raw(self, attr: str) -> str | None:
        if attr in self.attrs:
            return self.attrs[attr]
        return self.defaults.get(attr)

    def has(self, attr: str) -> bool:
        """Whether the attribute is set, on the element or by its default class."""
        return self.raw(attr) is not None

    def explicit(self, attr: str) -> bool:
        return attr in self.attrs

    def get(self, attr: str, default: Any = None) -> Any:
        """Typed value: str, int, float, keyword str, or float/int numpy array for vectors."""
        text = self.raw(attr)
        if text is None:
            return default
        spec = self.schema["attrs"].get(attr)
        if spec is None:
            raise self.error(f"attribute '{attr}' is not in the schema")
        value = convert(spec, text, attr, self)
        if attr in _POLYNOMIAL and isinstance(default, (int, float)) and spec[1] != 1:
            # A caller that asks for a scalar gets the linear coefficient; the higher ones
            # (MuJoCo 4.0's *_stiffnesspoly / *_dampingpoly) it would drop, so they must be 0.
            if np.any(value[1:] != 0):
                raise self.error(f"unsupported: nonlinear '{attr}' coefficients "
                                 f"('{text.strip()}') are not implemented by mjx_lite")
            return float(value[0]) if value.size else default
        return value

    def vec(self, attr: str, default) -> np.ndarray:
        """Float vector; a partial value overwrites the leading entries of what its default
        class gives, which overwrites the leading entries of ``default`` (MuJoCo's order)."""
        out = np.array(default, dtype=float).reshape(-1).copy()
        spec = self.schema["attrs"].get(attr)
        for text in (self.defaults.get(attr), self.attrs.get(attr)):
            if text is None:
                continue
            value = np.atleast_1d(np.asarray(convert(spec, text, attr, self), dtype=float))
            n = min(value.size, out.size)
            out[:n] = value[:n]
        return out


def _number(kind: str, part: str) -> float | int | None:
    """One number as MuJoCo reads it, or None where MuJoCo reports a bad format."""
    if kind == "int":
        return int(part) if _INT.fullmatch(part) else None
    if not _REAL.fullmatch(part):
        return None
    body = part.lstrip("+-")
    if body[:2].lower() == "0x":
        value = float.fromhex(body)
        return -value if part.startswith("-") else value
    return float(part)


def convert(spec: tuple, text: str, attr: str, el: Element) -> Any:
    kind, count, exact, _ = spec[0], spec[1], spec[2], spec[3]
    if kind == "keyword":
        # Case-sensitive and unpadded, as MuJoCo 4.0 reads keywords ("Hinge" is rejected).
        if text in count:
            return text
        raise el.error(f"attribute '{attr}' has invalid keyword '{text}' "
                       f"(expected one of {', '.join(count)})")
    if kind == "string":
        return text
    parts = text.split()
    values = [_number(kind, p) for p in parts]
    if any(v is None for v in values):
        raise el.error(f"attribute '{attr}' expects {_describe(spec)}, got '{text}'")
    limit = _FLOAT_MAX if attr in el.schema.get("single", ()) else math.inf
    for part, v in zip(parts, values):
        if kind == "int":
            too_large = not -_INT_MAX - 1 <= v <= _INT_MAX
        elif math.isinf(v):
            too_large = "inf" not in part.lower()  # overflow, not a written infinity
        else:
            too_large = abs(v) > limit
        if too_large:
            raise el.error(f"attribute '{attr}' has a number too large: '{part}'")
    if count == 1:
        if len(values) != 1:
            raise el.error(f"attribute '{attr}' expects {_describe(spec)}, got '{text}'")
        return values[0]
    if count is not None and (len(values) > count or (exact and len(values) < count)):
        raise el.error(f"attribute '{attr}' expects {_describe(spec)}, got '{text}'")
    return np.array(values, dtype=int if kind == "int" else float)


def _describe(spec: tuple) -> str:
    kind, count, exact = spec[0], spec[1], spec[2]
    noun = "integer" if kind == "int" else "number"
    if count == 1:
        return f"1 {noun}"
    if count is None:
        return f"a list of {noun}s"
    return f"{count} {noun}s" if exact else f"1 to {count} {noun}s"


@dataclasses.dataclass
class DefaultClass:
    name: str
    parent: DefaultClass | None
    values: dict[str, dict[str, str]]  # default tag -> attrs, parent values merged in
    actuator_ops: list[tuple[str, dict[str, str]]]  # actuator shortcuts in order, inherited


@dataclasses.dataclass
class Spec:
    """The parsed model: element tree, default classes and how to reach asset files."""

    root: Element
    classes: dict[str, DefaultClass]
    file: str
    model_dir: str | None
    assets: dict[str, bytes]

    def section(self, tag: str) -> list[Element]:
        """All children of the given top-level sections (sections may repeat)."""
        return [c for s in self.root.find(tag) for c in s.children]

    def compiler(self, attr: str, default: Any = None) -> Any:
        value = default
        for el in self.root.find("compiler"):
            if el.has(attr):
                value = el.get(attr)
        return value

    def read_file(self, name: str, kind: str, el: Element) -> bytes:
        """Bytes of an asset file, searched as MuJoCo does: assets dict, then disk.

        ``kind`` is 'mesh', 'hfield', 'texture' or 'skin'; meshdir/texturedir/assetdir apply.
        """
        directory = None
        if kind in ("mesh", "hfield", "skin"):
            directory = self.compiler("meshdir", self.compiler("assetdir"))
        elif kind == "texture":
            directory = self.compiler("texturedir", self.compiler("assetdir"))
        if self.compiler("strippath", "false") == "true":
            name = os.path.basename(name)
        candidates = []
        if directory:
            candidates.append(os.path.join(directory, name))
        candidates.append(name)
        for c in candidates:
            for key in (c, os.path.normpath(c)):
                if key in self.assets:
                    return self.assets[key]
        for c in candidates:
            path = c if os.path.isabs(c) else os.path.join(self.model_dir or ".", c)
            if self.model_dir is not None or os.path.isabs(c):
                if os.path.isfile(path):
                    with open(path, "rb") as f:
                        return f.read()
        raise el.error(f"{kind} file '{name}' not found (looked for {', '.join(candidates)})")


def _tag_before(text: bytes, line: int, column: int) -> str:
    """``<tag> `` for the element opened on the error's line before its column, if any."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    source = lines[line - 1].decode("utf-8", "replace")
    tags = re.findall(r"<([A-Za-z_][\w.:-]*)", source[:column] if column > 0 else source)
    return f"<{tags[-1]}> " if tags else ""


def _xml_tree(text: bytes, filename: str) -> etree._Element:
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, huge_tree=True)
    try:
        return etree.fromstring(text, parser)
    except etree.XMLSyntaxError as e:
        line = e.lineno if e.lineno else e.position[0] if e.position else 0
        column = e.position[1] if e.position else 0
        label = _tag_before(text, line, column)
        raise MJCFError(f"{os.path.basename(filename)}:{line}: {label}malformed XML: "
                        f"{e.msg}") from None


def _splice_includes(node: etree._Element, filename: str, model_dir: str | None,
                     assets: dict[str, bytes], seen: set[str], files: dict) -> None:
    """Replaces every <include file=.../> by the children of the included file's root."""
    for child in list(node):
        if not isinstance(child.tag, str):
            continue
        files[child] = filename
        if child.tag == "include":
            where = f"{os.path.basename(filename)}:{child.sourceline}: <include>"
            # MuJoCo 4.0 ignores other attributes of <include> and the included root's tag.
            name = child.get("file")
            if not name or not name.strip():
                raise MJCFError(f"{where} missing required attribute 'file'")
            if name in seen:
                raise MJCFError(f"{where} file '{name}' is included more than once")
            seen.add(name)
            data = assets.get(name)
            path = name if os.path.isabs(name) else os.path.join(model_dir or ".", name)
            if data is None:
                if model_dir is None and not os.path.isabs(name) or not os.path.isfile(path):
                    raise MJCFError(f"{where} included file '{name}' not found")
                with open(path, "rb") as f:
                    data = f.read()
            sub = _xml_tree(data, path if model_dir is not None else name)
            sub_file = path if model_dir is not None else name
            _splice_includes(sub, sub_file, model_dir, assets, seen, files)
            index = node.index(child)
            node.remove(child)
            for offset, grandchild in enumerate(list(sub)):
                node.insert(index + offset, grandchild)
        else:
            _splice_includes(child, filename, model_dir, assets, seen, files)


_WORLD = next(c for c in SCHEMA["children"] if c["world"])  # body / worldbody schema


def _child_schema(schema: dict, tag: str, parent_tag: str) -> dict | None:
    if tag == "worldbody" and parent_tag == "mujoco":
        body = next(c for c in schema["children"] if c["name"] == "body")
        return dict(body, attrs={})  # worldbody takes no attributes (seed F0:853)
    if tag == "body" and parent_tag in ("worldbody", "frame", "replicate"):
        return _WORLD
    if schema.get("like") == "body":  # frame, replicate: what a body may hold
        schema = _WORLD
    for c in schema["children"]:
        if c["name"] == tag:
            return c
    if schema["repeat"] == "R" and tag == schema["name"]:
        return schema
    return None


def _check_frame_scale(el: Element) -> None:
    """Frame scaling (MuJoCo 4.0) resizes geometry and mass; only the identity is supported."""
    scale = el.attrs.get("scale")
    if scale is not None and any(v != 1.0 for v in convert(el.schema["attrs"]["scale"], scale,
                                                           "scale", el)):
        raise el.error("unsupported: frame scale is not implemented by mjx_lite")
    if el.has("massscale") and el.get("massscale") != 1.0:
        raise el.error("unsupported: frame massscale is not implemented by mjx_lite")


def _check_numeric(el: Element) -> None:
    """<numeric>: size, when given, must be positive and hold the data; one of them is needed."""
    n_data = len(el.attrs.get("data", "").split())
    size = el.get("size") if "size" in el.attrs else None
    if (size is not None and size <= 0) or (size is None and n_data == 0):
        raise el.error("custom numeric field needs a positive 'size' or some 'data'")
    if size is not None and n_data > size:
        raise el.error(f"attribute 'data' has {n_data} numbers, more than size={size}")


def _in_world(parent: Element | None) -> bool:
    """Whether the element's nearest body is the world body (frames are transparent)."""
    while parent is not None and parent.tag in ("frame", "replicate"):
        parent = parent.parent
    return parent is not None and parent.tag == "worldbody"


def _build(xml: etree._Element, schema: dict, files: dict, root_file: str,
           parent: Element | None) -> Element:
    filename = files.get(xml, root_file)
    el = Element(tag=xml.tag, attrs=dict(xml.attrib), file=filename, line=xml.sourceline or 0,
                 schema=schema, parent=parent)
    for attr, text in list(el.attrs.items()):
        spec = schema["attrs"].get(attr)
        if spec is None:
            if el.tag == "worldbody":
                raise el.error(f"unrecognized attribute '{attr}': the world body takes none")
            raise el.error(f"unrecognized attribute '{attr}'")
        if spec[0] in ("int", "real") and not text.strip():
            if attr in schema.get("noblank", ()):
                raise el.error(f"attribute '{attr}' expects {_describe(spec)}, got ''")
            del el.attrs[attr]  # MuJoCo reads a blank number as an absent attribute
            continue
        convert(spec, text, attr, el)  # validates type and count now
        fmt = _FORMATS.get((el.tag, attr))
        if fmt is not None and not fmt[0].fullmatch(text):
            raise el.error(f"attribute '{attr}' expects {fmt[1]}, got '{text}'")
    if parent is None or parent.tag != "default":
        for attr in (*schema.get("required", ()), *_COMPILE_REQUIRED.get(el.tag, ())):
            if attr not in el.attrs:
                raise el.error(f"missing required attribute '{attr}'")
        for group in schema.get("together", ()):
            given = [a for a in group if a in el.attrs]
            if given and len(given) < len(group):
                missing = next(a for a in group if a not in el.attrs)
                raise el.error(f"missing required attribute '{missing}' (given with "
                               f"'{given[0]}')")
        for groups in schema.get("oneof", ()):
            if not any(all(a in el.attrs for a in group) for group in groups):
                options = " or ".join("+".join(group) for group in groups)
                raise el.error(f"missing required attribute: needs {options}")
    if el.tag == "frame":
        _check_frame_scale(el)
    if el.tag == "numeric" and parent is not None and parent.tag == "custom":
        _check_numeric(el)
    if el.tag in _NOT_IN_WORLD and _in_world(parent):
        raise el.error(f"the world body cannot have {_NOT_IN_WORLD[el.tag]}")
    counts: dict[str, int] = {}
    for child in xml:
        if not isinstance(child.tag, str):
            continue
        sub = _child_schema(schema, child.tag, el.tag)
        where = f"{os.path.basename(files.get(child, filename))}:{child.sourceline}: <{child.tag}>"
        if el.tag == "default" and sub is None and child.tag == "default":
            sub = schema
        if sub is None:
            raise MJCFError(f"{where} unrecognized element inside <{el.tag}>")
        counts[child.tag] = counts.get(child.tag, 0) + 1
        if sub["repeat"] in ("?", "!") and counts[child.tag] > 1:
            raise MJCFError(f"{where} element may appear only once inside <{el.tag}>")
        if child.tag in UNSUPPORTED and el.tag != "default":
            raise MJCFError(f"{where} unsupported: {UNSUPPORTED[child.tag]} is not "
                            "implemented by mjx_lite")
        el.children.append(_build(child, sub, files, root_file, el))
    return el


def _collect_classes(root: Element) -> dict[str, DefaultClass]:
    classes: dict[str, DefaultClass] = {}
    main = DefaultClass("main", None, {}, [])
    classes["main"] = main

    def visit(el: Element, cls: DefaultClass) -> None:
        for child in el.children:
            if child.tag == "default":
                name = child.attrs.get("class")
                if not name:
                    raise child.error("missing required attribute 'class' (a nested default "
                                      "needs a class name)")
                if name in classes:
                    raise child.error(f"repeated default class name '{name}'")
                sub = DefaultClass(name, cls, {k: dict(v) for k, v in cls.values.items()},
                                   list(cls.actuator_ops))
                classes[name] = sub
                visit(child, sub)
            else:
                if child.tag in _ACTUATOR_TAGS:
                    cls.actuator_ops.append((child.tag, dict(child.attrs)))
                # Material layers (the only grandchildren) are visual: kept out of the physics.
                cls.values.setdefault(child.tag, {}).update(child.attrs)

    for top in root.find("default"):
        name = top.attrs.get("class", "main")
        if name != "main":
            raise top.error(f"the top-level default class is 'main' and cannot be renamed "
                            f"'{name}'")
        visit(top, main)
    return classes


def _assign_classes(el: Element, classes: dict[str, DefaultClass], childclass: str) -> None:
    for child in el.children:
        if child.tag == "default":
            continue
        tag = default_tag(el.tag, child.tag)
        cls_name = child.attrs.get("class", childclass if el.tag in ("body", "worldbody",
                                                                       "frame") else "main")
        if cls_name not in classes:
            raise child.error(f"unknown default class '{cls_name}'")
        child.cls = cls_name
        if tag is not None:
            values = classes[cls_name].values
            merged: dict[str, str] = {}
            if el.tag == "actuator":
                # Every actuator shortcut in a class writes the same default actuator; the
                # shortcut-specific mapping is the actuator builder's (seed F0:1739).
                for _shortcut, attrs in classes[cls_name].actuator_ops:
                    merged.update(attrs)
            else:
                merged.update(values.get(tag, {}))
            merged.pop("class", None)
            merged.pop("name", None)
            child.defaults = {k: v for k, v in merged.items() if k in child.schema["attrs"]}
        inner = childclass
        if child.tag in ("body", "frame") and "childclass" in child.attrs:
            inner = child.attrs["childclass"]
            if inner not in classes:
                raise child.error(f"unknown default class '{inner}'")
        _assign_classes(child, classes, inner)


def parse(text: str | bytes, filename: str = STRING_FILE, model_dir: str | None = None,
          assets: dict[str, bytes] | None = None) -> Spec:
    """Parses MJCF text: includes spliced, schema checked, default classes resolved."""
    assets = dict(assets or {})
    data = text.encode() if isinstance(text, str) else text
    xml = _xml_tree(data, filename)
    if xml.tag != "mujoco":
        raise MJCFError(f"{os.path.basename(filename)}:{xml.sourceline}: <{xml.tag}> "
                        "the root element must be <mujoco>")
    files: dict = {}
    _splice_includes(xml, filename, model_dir, assets, set(), files)
    root = _build(xml, SCHEMA, files, filename, None)
    classes = _collect_classes(root)
    _assign_classes(root, classes, "main")
    return Spec(root=root, classes=classes, file=filename, model_dir=model_dir, assets=assets)
