"""Generates mjx_lite/compiler/schema.py from MuJoCo 4.0's own schema and reference.

Run by a developer (needs the test extra's ``mujoco``): element nesting and attribute names come
from ``mujoco.mj_printSchema``; attribute types from the XML reference shipped in the wheel
(``mujoco/doc/XMLreference.rst``). The engine never imports mujoco: it reads the generated table.

What the reference does not say is measured by loading tiny models into mujoco (``_probe``, a
few thousand loads, about a minute):
- exactness: a vector attribute given N-1 of its N numbers is either rejected ("not enough data")
  or read partially; measured per element (e.g. pos, quat, rgba, range, hfield size, texrepeat,
  lengthrange are exact; size, friction, solref, solimp, gear, gainprm, surfacevel, sensor
  interval, actuator damping are partial). ``PARTIAL`` only decides where a probe cannot reach
  the attribute.
- vector sizes the reference shows only by a default (joint/tendon stiffness and damping are
  "linear quadratic cubic" polynomials in 4.0), and scalars that take more (none in 4.0.0).
- required attributes ("required attribute missing"), "one of ... must be specified" groups and
  attributes that must be "specified together" (sensor reftype/refname).
- numbers that reject an empty value (size nstack, inertial mass...); the rest read it as absent.
- single precision: attributes MuJoCo stores as float reject magnitudes above 3.4e38 (rgba...).
- keyword options the reference lists but MuJoCo rejects, int attributes that accept reals.
Findings that hold for every attribute, checked by hand against 4.0.0 and encoded in parse.py:
keywords are case-sensitive and unpadded ("Hinge", "TRUE", " RK4" are rejected; "Euler", "PGS",
"Newton" are spelled so); ints are decimal, optionally signed, within int32 ("3.0", "3e0", "0x10"
rejected); reals are C strtod numbers (inf, nan, hex floats accepted; "1_0", "1,2", "1d0"
rejected; overflow to infinity rejected, underflow accepted); a numeric attribute that is empty
or blank counts as absent; names and other strings are taken verbatim.
"""

from __future__ import annotations

import os
import pprint
import re

import mujoco

# Attributes whose reference entry is shared with others and carries no type of its own.
GROUPED = {
    "quat": "real(4)", "axisangle": "real(4)", "xyaxes": "real(6)", "zaxis": "real(3)",
    "euler": "real(3)", "o_solref": "real(2)", "o_solimp": "real(5)", "o_friction": "real(5)",
    "noise": "real", "surfacevel": "real(6)", "enclosed": "string",
}
# Sensor attributes documented once for all sensors; the first label-less type is not theirs.
SENSOR_COMMON = {"cutoff": "real", "nsample": "int", "interval": "real(2)", "delay": "real"}
# Vector attributes MuJoCo reads with fewer values than their size (checked against 4.0).
PARTIAL = {
    "size", "friction", "gear", "gainprm", "biasprm", "dynprm", "user", "fluidcoef", "polycoef",
    "data", "o_friction", "o_solimp", "o_solref", "solimp", "solref", "solreflimit",
    "solimplimit", "solreffriction", "solimpfriction", "solrefsmooth", "solimpsmooth",
    "solreffix", "solimpfix", "margin", "vertex", "face", "normal", "texcoord", "elevation",
    "qpos", "qvel", "act", "ctrl", "mpos", "mquat", "intprm", "actuatorgroupdisable",
    "springlength", "texrepeat", "params", "relpose", "anchor", "lengthrange",
}


def _type(text: str, attr: str):
    text = text.strip()
    required = "required" in text
    m = re.match(r"\[([^\]]*)\]", text)
    if m:
        return ("keyword", tuple(k.strip() for k in m.group(1).split(",")), 1, required)
    m = re.match(r"(string|int|real)(?:\(([^)]*)\))?", text)
    if not m:
        return None
    kind, count = m.group(1), m.group(2)
    default = re.search(r"'([^']*)'", text)
    if count is None and kind != "string" and default and len(default.group(1).split()) > 1:
        # "real, '0 0 0'": a vector whose size only the default shows (4.0's polynomial joint
        # and tendon stiffness/damping, pair solreffriction); MuJoCo reads it partially.
        n = len(default.group(1).split())
    elif count is None:
        n = 1
    elif count.isdigit():
        n = int(count)
    else:
        n = -1  # data-dependent length
    exact = n > 1 and attr not in PARTIAL and not (count is None and default)
    return (kind, n if n != -1 else None, exact, required)


def _reference_types(path: str) -> dict[str, dict[str, tuple]]:
    types: dict[str, dict[str, tuple]] = {}
    labels: list[str] = []
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        lm = re.match(r"^\.\. _([A-Za-z0-9_-]+):$", line)
        if lm:
            labels.append(lm.group(1))
            continue
        am = re.match(r"^:at:`([a-zA-Z0-9_]+)`(.*)$", line)
        if am and labels:
            names = re.findall(r":at:`([a-zA-Z0-9_]+)`", line)
            vm = re.search(r":at-val:`([^`]*)`", line)
            for label in labels:
                elem = label.rsplit("-", 1)[0]
                for name in names:
                    t = None
                    if elem.startswith("sensor-") and name in SENSOR_COMMON:
                        t = _type(SENSOR_COMMON[name], name)
                    elif vm:
                        t = _type(vm.group(1).replace('"', "'"), name)
                    elif name in GROUPED:
                        t = _type(GROUPED[name], name)
                    elif name.startswith("solref"):
                        t = _type("real(2)", name)
                    elif name.startswith("solimp"):
                        t = _type("real(5)", name)
                    if t is not None:
                        types.setdefault(elem, {})[name] = t
            labels = []
        elif line.strip() and not line.startswith((".. ", "   ")):
            labels = []
    return types


def _parse_print(text: str):
    root = None
    stack = []
    for line in text.splitlines():
        if not line.strip():
            continue
        head, attrs = line[:30], line[30:].split()
        if head.strip():
            indent = (len(head) - len(head.lstrip())) // 3
            name, rep = head.split()
            node = {"name": name.replace("(world)", ""), "world": "(world)" in name,
                    "repeat": rep.strip("()"), "attrs": list(attrs), "children": []}
            stack = stack[:indent]
            if stack:
                stack[-1]["children"].append(node)
            else:
                root = node
            stack.append(node)
        else:
            stack[-1]["attrs"].extend(attrs)
    return root


_SKIP_PROBE = ("model", "attach")  # need real files; a missing one can stall the loader


def _load_error(xml: str) -> str:
    try:
        mujoco.MjModel.from_xml_string(xml)
    except Exception as e:  # noqa: BLE001 - any rejection is a finding
        return str(e).split("\n")[0]
    return ""


def _fill_value(t: tuple) -> str:
    kind, count = t[0], t[1]
    if kind == "keyword":
        return count[0]
    if kind == "string":
        return "zzqq"
    return " ".join(["1"] * (count or 1))


def _xml(path: list[dict], leaf: dict[str, str]) -> str:
    """A model with the element at ``path`` (schema nodes below the root), ancestors filled."""
    tags = []
    for i, node in enumerate(path):
        attrs = dict(node.get("_fill", {})) if i < len(path) - 1 else leaf
        text = " ".join(f'{k}="{v}"' for k, v in attrs.items())
        if node["world"]:  # probed as a body inside the world body
            tags += [("worldbody", ""), ("body", text if i == len(path) - 1 else "")]
            continue
        tags.append((node["name"], text))
    inner = ""
    for tag, text in reversed(tags):
        inner = f"<{tag} {text}>{inner}</{tag}>"
    return f"<mujoco>{inner}</mujoco>"


def _probe(node: dict, path: list[dict], findings: list[str]) -> None:
    """Measures what the reference leaves open for one element (see the module docstring)."""
    attrs = node["attrs"]
    path = path + [node]
    fill: dict[str, str] = {}
    required, oneof = [], []
    for _ in range(10):
        err = _load_error(_xml(path, fill))
        m = re.search(r"required attribute missing: '(\w+)'", err)
        if m and m.group(1) in attrs and m.group(1) not in fill:
            required.append(m.group(1))
            fill[m.group(1)] = _fill_value(attrs[m.group(1)])
            continue
        if "one of" in err and "must be" in err:
            groups = [tuple(re.findall(r"'(\w+)'", g))
                      for g in re.findall(r"\([^)]*\)|'\w+'", err.split("one of", 1)[1])]
            if groups and all(a in attrs for g in groups for a in g) and groups not in oneof:
                oneof.append(groups)
                fill.update({a: _fill_value(attrs[a]) for a in groups[0]})
                continue
        break
    node["_fill"] = fill
    node["required"] = required
    node["oneof"] = oneof

    def err_with(attr: str, value: str) -> str:
        return _load_error(_xml(path, dict(fill, **{attr: value})))

    single, blank_bad, together = [], [], []
    for name, t in list(attrs.items()):
        kind, count = t[0], t[1]
        if kind in ("real", "int") and count == 1 and "bad format" in err_with(name, "zzqq"):
            n = 1
            while n < 40 and "too much data" not in err_with(name, " ".join(["1"] * (n + 1))):
                n += 1
            if n > 1:  # documented as a scalar, read as a vector
                findings.append(f"{node['name']}.{name}: takes up to {n} numbers")
                count, t = n, (kind, n, False, t[3])
        if kind in ("string", "keyword"):
            err = err_with(name, _fill_value(t))
            if "must be specified together" in err:
                group = tuple(sorted(re.findall(r"'(\w+)'", err.split("together")[0])))
                if group not in together and all(a in attrs for a in group):
                    together.append(group)
        if kind in ("real", "int") and f"'{name}'" in err_with(name, ""):
            blank_bad.append(name)  # most numbers read "" as absent; these reject it
        if kind in ("real", "int") and count and count > 1:
            more = err_with(name, " ".join(["1"] * (count + 1)))
            if "too much data" in more:
                less = err_with(name, " ".join(["1"] * (count - 1)))
                exact = "not have enough data" in less
                if exact != t[2]:
                    findings.append(f"{node['name']}.{name}: exact={exact} (measured)")
                t = (kind, count, exact, t[3])
        if kind == "real" and count:
            if "too large" in err_with(name, " ".join(["1e39"] * count)):
                single.append(name)
        if kind == "int" and count == 1:
            if "bad format" in err_with(name, "zzqq") and not err_with(name, "1.5"):
                findings.append(f"{node['name']}.{name}: accepts reals, typed real")
                t = ("real", 1, False, t[3])
        if kind == "keyword":
            options = tuple(o for o in count if "invalid keyword" not in err_with(name, o))
            if options != count:
                findings.append(f"{node['name']}.{name}: rejected options "
                                f"{sorted(set(count) - set(options))}")
                t = (kind, options, 1, t[3])
        t = (t[0], t[1], t[2], name in required)  # measured, not the reference's word
        attrs[name] = t
    node["single"] = tuple(single)
    node["noblank"] = tuple(blank_bad)
    node["together"] = together


def _strip(node: dict) -> None:
    node.pop("_fill", None)
    for child in node["children"]:
        _strip(child)


# Attributes holding a space-separated list of keywords (the reference types them as one
# keyword); typed as strings here and checked field by field in compiler/sensors.py.
_KEYWORD_LISTS = {("sensor-rangefinder", "data"), ("sensor-contact", "data")}


def main():
    doc = os.path.join(os.path.dirname(mujoco.__file__), "doc", "XMLreference.rst")
    types = _reference_types(doc)
    by_attr: dict[str, tuple] = {}
    for elem_name, elem in types.items():
        if elem_name.startswith("option-flag"):
            continue
        for name, t in elem.items():
            by_attr.setdefault(name, t)
    root = _parse_print(mujoco.mj_printSchema(False, True))
    missing = []

    def annotate(node, path):
        elem_path = "-".join(path[1:] + [node["name"]]) if path else node["name"]
        candidates = [elem_path, "-".join(path[-1:] + [node["name"]]), node["name"]]
        if path and path[-1] == "default":
            candidates += [f"body-{node['name']}", f"actuator-{node['name']}",
                           f"asset-{node['name']}", f"contact-{node['name']}",
                           "equality-connect", "tendon-spatial", "actuator-general"]
        if path and path[-1] in ("tendon", "actuator", "equality"):
            candidates += ["tendon-spatial", "actuator-general", "equality-connect"]
        out = {}
        for attr in node["attrs"]:
            t = None
            for c in candidates:
                t = types.get(c, {}).get(attr)
                if t:
                    break
            if t is None:
                t = by_attr.get(attr)
            if t is None:
                missing.append(f"{elem_path}.{attr}")
                t = ("string", 1, False, False)
            if (elem_path, attr) in _KEYWORD_LISTS:
                t = ("string", 1, False, False)
            out[attr] = t
        node["attrs"] = out
        for child in node["children"]:
            annotate(child, path + [node["name"]])

    annotate(root, [])
    findings: list[str] = []

    def probe(node, path):
        if node["name"] in _SKIP_PROBE:
            node.update(required=[], oneof=[], single=(), noblank=(), together=[])
            for child in node["children"]:
                probe(child, path + [node])
            return
        if path:  # the root <mujoco> has nothing to measure
            _probe(node, path[1:], findings)
        else:
            node.update(required=[], oneof=[], single=(), noblank=(), together=[])
        for child in node["children"]:
            probe(child, path + [node])

    # frame and replicate are meta-elements outside mj_printSchema; they hold what a body holds
    # ("like": "body") and are typed from the reference like everything else.
    world = next(c for c in root["children"] if c["world"])
    for name in ("frame", "replicate"):
        node = {"name": name, "world": False, "repeat": "*", "like": "body",
                "attrs": dict(types.get(name, {})), "children": []}
        world["children"].append(node)
    probe(root, [])
    _strip(root)
    target = os.path.join(os.path.dirname(__file__), "..", "mjx_lite", "compiler", "schema.py")
    with open(target, "w") as f:
        f.write('"""MuJoCo 4.0\'s MJCF schema: element nesting and typed attributes.\n\n'
                "Generated by scripts/gen_schema.py from mujoco.mj_printSchema and the XML "
                "reference in\nthe mujoco 4.0.0 wheel. Do not edit by hand. Each node: name, "
                "repeat (!, ?, *, R),\nattrs {name: (kind, count or None, exact, required)}; "
                "keyword attrs: (\"keyword\", options,\n1, required); required: attribute "
                "names MuJoCo demands; oneof: lists of alternative\nattribute groups of which "
                "one must be given; single: attributes stored in single "
                "precision;\nnoblank: numeric attributes that reject an empty value (the "
                "others read it as absent);\ntogether: attribute groups given all or none.\n"
                "\"\"\"\n\n")
        f.write("# fmt: off\n")
        f.write("SCHEMA = " + pprint.pformat(root, width=100, sort_dicts=False) + "\n")
    print("attributes without a type in the reference (typed as string):", missing)
    print("measured against mujoco:", *sorted(set(findings)), sep="\n  ")


if __name__ == "__main__":
    main()
