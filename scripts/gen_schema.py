"""Generates mjx_lite/compiler/schema.py from MuJoCo 4.0's own schema and reference.

Run by a developer (needs the test extra's ``mujoco``): element nesting and attribute names come
from ``mujoco.mj_printSchema``; attribute types from the XML reference shipped in the wheel
(``mujoco/doc/XMLreference.rst``). The engine never imports mujoco: it reads the generated table.
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
    if count is None:
        n = 1
    elif count.isdigit():
        n = int(count)
    else:
        n = -1  # data-dependent length
    exact = n > 1 and attr not in PARTIAL
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
            out[attr] = t
        node["attrs"] = out
        for child in node["children"]:
            annotate(child, path + [node["name"]])

    annotate(root, [])
    target = os.path.join(os.path.dirname(__file__), "..", "mjx_lite", "compiler", "schema.py")
    with open(target, "w") as f:
        f.write('"""MuJoCo 4.0\'s MJCF schema: element nesting and typed attributes.\n\n'
                "Generated by scripts/gen_schema.py from mujoco.mj_printSchema and the XML "
                "reference in\nthe mujoco 4.0.0 wheel. Do not edit by hand. Each node: name, "
                "repeat (!, ?, *, R),\nattrs {name: (kind, count or None, exact, required)}; "
                "keyword attrs: (\"keyword\", options,\n1, required).\n\"\"\"\n\n")
        f.write("# fmt: off\n")
        f.write("SCHEMA = " + pprint.pformat(root, width=100, sort_dicts=False) + "\n")
    print("attributes without a type in the reference (typed as string):", missing)


if __name__ == "__main__":
    main()
