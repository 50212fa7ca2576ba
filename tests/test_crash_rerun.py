"""The CI tier's guard against dying workers (tests/crash_rerun.py), run on a small suite of
its own under pytest-xdist: a test whose worker dies once, or hangs past the time limit once,
passes on its second run; a test whose worker dies every time fails the run."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

TESTS_DIR = pathlib.Path(__file__).resolve().parent

SUITE = '''
import os, pathlib, time

HERE = pathlib.Path(__file__).parent

def _first_time(name):
    marker = HERE / name
    if marker.exists():
        return False
    marker.write_text("")
    return True

def test_before():
    pass

def test_dies_once():
    if _first_time("died"):
        os.abort()

def test_hangs_once():
    if _first_time("hung"):
        time.sleep(120)

def test_dies_always():
    if os.environ.get("DIE_ALWAYS"):
        os.abort()

def test_after():
    pass
'''


def _run_suite(tmp_path: pathlib.Path, *, die_always: bool) -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        from crash_rerun import (  # noqa: F401
            pytest_handlecrashitem, pytest_report_teststatus, pytest_terminal_summary)
        """))
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    env = {"PATH": "/usr/bin:/bin", "DIE_ALWAYS": "1" if die_always else ""}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-q",
         "-p", "no:cacheprovider", "-o", "faulthandler_timeout=3",
         "-o", "faulthandler_exit_on_timeout=true", "--max-worker-restart", "3"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_worker_that_dies_once_reruns_and_passes(tmp_path):
    result = _run_suite(tmp_path, die_always=False)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "6 passed, 2 rerun" in out, out
    reruns = out[out.index("re-run after their worker died"):]
    assert "test_suite.py::test_dies_once" in reruns and "test_suite.py::test_hangs_once" in reruns


def test_worker_that_always_dies_fails_the_run(tmp_path):
    result = _run_suite(tmp_path, die_always=True)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "FAILED test_suite.py::test_dies_always" in out, out
