"""Bad MJCF input: every file in tests/bad_mjcf/ is rejected by MuJoCo 4.0 and by mjx_lite, and
mjx_lite's MJCFError names the file, line and element.

Each case marks the offending line with an ``<!-- error -->`` comment (for malformed XML: the
line lxml reports); ``<!-- error-in: include/x.xml -->`` moves the mark to an included file.
``unsupported_*`` cases are valid MuJoCo 4.0 that mjx_lite does not implement: MuJoCo loads them
and mjx_lite raises ``MJCFError("... unsupported: ...")``.
"""

from __future__ import annotations

import glob
import os
import re

import pytest

import mjx_lite
from mjx_lite.compiler import parse
from mjx_lite.errors import MJCFError

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "bad_mjcf")
CASES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(CORPUS, "*.xml")))
load_model = mjx_lite.load_model


def _expected(case: str) -> tuple[str, int, str | None]:
    """(file name, line, element tag or None) the error must name."""
    path = os.path.join(CORPUS, case)
    text = open(path).read()
    m = re.search(r"<!-- error-in: (\S+) -->", text)
    if m:
        path = os.path.join(CORPUS, m.group(1))
        text = open(path).read()
    for number, line in enumerate(text.splitlines(), 1):
        if "<!-- error -->" in line:
            tag = re.match(r"\s*<([A-Za-z_]\w*)", line)
            return os.path.basename(path), number, tag.group(1) if tag else None
    raise AssertionError(f"{case} has no <!-- error --> mark")


def test_corpus_covers_every_class():
    prefixes = ("malformed_", "root_", "unknown_element_", "unique_element_", "world_",
                "unknown_attribute_", "bad_count_", "bad_number_", "bad_int_", "bad_keyword_",
                "bad_value_", "missing_required_", "missing_mesh_file", "missing_hfield_file",
                "missing_texture_file", "bad_mesh_file", "unknown_name_", "duplicate_",
                "default_", "childclass_", "include_", "unsupported_")
    for prefix in prefixes:
        assert any(c.startswith(prefix) for c in CASES), prefix
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES)
def test_mujoco_agrees(case):
    """The corpus is judged by MuJoCo 4.0 itself."""
    import mujoco
    path = os.path.join(CORPUS, case)
    if case.startswith("unsupported_"):
        mujoco.MjModel.from_xml_path(path)  # valid MuJoCo 4.0
    else:
        with pytest.raises(ValueError):
            mujoco.MjModel.from_xml_path(path)


@pytest.mark.parametrize("case", CASES)
def test_rejected_with_location(case):
    file, line, tag = _expected(case)
    with pytest.raises(MJCFError) as info:
        load_model(os.path.join(CORPUS, case))
    message = str(info.value)
    assert message.startswith(f"{file}:{line}:"), message
    if tag is not None:
        assert f"<{tag}" in message, message
    if case.startswith("unsupported_"):
        assert "unsupported:" in message, message


def test_message_example():
    """The issue's example: attribute, what it expects, what it got."""
    with pytest.raises(MJCFError) as info:
        load_model(os.path.join(CORPUS, "bad_number_size.xml"))
    assert str(info.value) == ("bad_number_size.xml:5: <geom name=\"leg\"> attribute 'size' "
                               "expects 1 to 3 numbers, got 'abc'")


STRING_CASES = {
    "<mujoco>\n  <worldbody>\n    <geom size='0.1' frction='1'/>\n  </worldbody>\n</mujoco>":
        "<string>:3: <geom>",
    "<mujoco>\n  <worldbody>\n    <body>\n      <joint type='Hinge'/>\n    </body>\n"
    "  </worldbody>\n</mujoco>": "<string>:4: <joint>",
    "<mujoco>\n  <worldbody>\n    <geom size='0.1'>\n  </worldbody>\n</mujoco>": "<string>:4:",
    "<mujoco>\n  <include file='missing.xml'/>\n</mujoco>": "<string>:2: <include>",
    "<mujoco>\n  <default>\n    <default class='a'/>\n  </default>\n  <worldbody>\n"
    "    <geom class='b' size='1'/>\n  </worldbody>\n</mujoco>": "<string>:6: <geom>",
}


@pytest.mark.parametrize("xml", list(STRING_CASES))
def test_string_named(xml):
    with pytest.raises(MJCFError) as info:
        mjx_lite.load_model_from_string(xml)
    assert str(info.value).startswith(STRING_CASES[xml]), str(info.value)


def test_string_include_from_assets():
    """An error inside an included file names that file (from the assets dict) and its line."""
    inner = b"<mujoco>\n  <body>\n    <geom size='0.1' pos='1 2'/>\n  </body>\n</mujoco>\n"
    xml = "<mujoco>\n  <worldbody>\n    <include file='leg.xml'/>\n  </worldbody>\n</mujoco>"
    with pytest.raises(MJCFError) as info:
        mjx_lite.load_model_from_string(xml, assets={"leg.xml": inner})
    assert str(info.value).startswith("leg.xml:3: <geom>"), str(info.value)


def _mujoco_agrees(xml: str, ok: bool) -> None:
    """The expectation is MuJoCo 4.0's: it loads ``xml`` exactly when ``ok``."""
    import mujoco
    try:
        mujoco.MjModel.from_xml_string(xml)
        loaded = True
    except ValueError:
        loaded = False
    assert loaded == ok, xml


@pytest.mark.parametrize("value, ok", [
    ("1", True), ("+1.5", True), (".5", True), ("1.", True), ("1e-3", True), ("inf", True),
    ("Infinity", True), ("nan", True), ("0x1p3", True), ("1e-400", True), (" 2 ", True),
    ("", True), ("1e400", False), ("1_0", False), ("1d0", False), ("1,", False),
    ("--1", False), ("0x", False), ("abc", False), ("1 2", False),
])
def test_real_syntax(value, ok):
    """Reals are read as MuJoCo 4.0 reads them (checked against it in gen_schema.py)."""
    xml = f"<mujoco><option timestep='{value}'/></mujoco>"
    _mujoco_agrees(xml, ok)
    if ok:
        parse.parse(xml)
    else:
        with pytest.raises(MJCFError, match="timestep"):
            parse.parse(xml)


@pytest.mark.parametrize("value, ok", [
    ("3", True), ("+3", True), ("-3", True), ("03", True), ("2147483647", True),
    ("-2147483648", True), ("", True), ("3.0", False), ("3e0", False), ("0x10", False),
    ("2147483648", False), ("-2147483649", False),
])
def test_int_syntax(value, ok):
    xml = f"<mujoco><worldbody><geom size='1' conaffinity='{value}'/></worldbody></mujoco>"
    _mujoco_agrees(xml, ok)
    if ok:
        parse.parse(xml)
    else:
        with pytest.raises(MJCFError, match="conaffinity"):
            parse.parse(xml)


@pytest.mark.parametrize("attrs, ok", [
    ("size='1'", True), ("size='1 2'", True), ("size='1 2 3 4'", False),
    ("friction='1'", True), ("solref='0.02'", True), ("solimp='0.9 0.95'", True),
    ("pos='1 2 3'", True), ("pos='1 2'", False), ("quat='1 0 0'", False),
    ("rgba='1 0 0'", False), ("rgba='3e38 0 0 1'", True), ("rgba='1e39 0 0 1'", False),
    ("type='box'", True), ("type='Box'", False), ("type=' box'", False),
])
def test_counts_and_keywords(attrs, ok):
    """Which vectors MuJoCo 4.0 reads partially, single precision, exact keywords."""
    size = "" if "size=" in attrs else "size='1 1 1'"
    xml = f"<mujoco><worldbody><geom {size} {attrs}/></worldbody></mujoco>"
    _mujoco_agrees(xml, ok)
    if ok:
        parse.parse(xml)
    else:
        with pytest.raises(MJCFError, match="<geom>"):
            parse.parse(xml)


def test_blank_number_is_absent():
    spec = parse.parse("<mujoco><worldbody><geom size='1' mass=' ' pos=''/></worldbody></mujoco>")
    geom = spec.section("worldbody")[0]
    assert not geom.has("mass") and not geom.has("pos")


def test_meta_elements_accepted():
    """frame (nested, with bodies and joints below a body) and includes whose root is not
    <mujoco> are valid MuJoCo 4.0."""
    xml = """<mujoco><worldbody><frame pos='0 0 1' euler='0 0 90'><frame><body>
      <frame><joint/></frame><geom size='1'/></body></frame></frame>
      <include file='part.xml'/></worldbody></mujoco>"""
    spec = parse.parse(xml, assets={"part.xml": b"<part><geom size='2'/></part>"})
    assert [c.tag for c in spec.section("worldbody")] == ["frame", "geom"]


def _valid_models():
    """Every test-data model MuJoCo 4.0 compiles (two of the wheel's files it rejects)."""
    import mujoco

    from conftest import GYM_ASSETS, MJX_TEST_DATA, MODELS_DIR

    paths = sorted(GYM_ASSETS.glob("*.xml")) + sorted(MJX_TEST_DATA.rglob("*.xml"))
    valid = []
    for path in paths + sorted(MODELS_DIR.glob("*.xml")):
        try:
            mujoco.MjModel.from_xml_path(str(path))
        except Exception:  # noqa: BLE001, S112 - not a valid MuJoCo 4.0 model: not test data
            continue
        valid.append(path)
    return valid


@pytest.mark.parametrize("path", _valid_models(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_valid_models_parse(path):
    """What MuJoCo 4.0 compiles, the parser (schema, includes, default classes) accepts."""
    parse.parse(path.read_bytes(), str(path), str(path.parent))
