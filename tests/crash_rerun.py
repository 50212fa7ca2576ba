"""pytest hooks that give a test whose pytest-xdist worker died one more run.

A worker of an xdist run can die inside XLA's CPU compiler: jaxlib 0.10 has aborted or
segfaulted in ``backend_compile_and_load`` about once per few full CI-tier runs, each time in a
different test, every one of which passed when run again. xdist then starts a new worker and,
with ``--dist loadfile``, queues the unfinished part of the dead worker's file again, the test
it died in included. That test's first death is reported as a rerun, not a failure, so its
second run decides; a test that dies twice fails, and so does every death after the session's
first ``MAX_CRASH_RERUNS``. .ci/run turns a test that hangs past its time limit into such a
death (pytest's ``faulthandler_exit_on_timeout``). tests/conftest.py imports these hooks.
"""

from __future__ import annotations

import pytest

MAX_CRASH_RERUNS = 3
crash_reruns: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    """pytest-xdist's hook, called in the controlling process when a worker dies."""
    if crashitem in crash_reruns or len(crash_reruns) >= MAX_CRASH_RERUNS:
        return
    if not hasattr(sched, "workqueue"):  # --dist load: the crashed test is not re-queued
        try:
            sched.mark_test_pending(crashitem)
        except NotImplementedError:
            return
    crash_reruns.append(crashitem)
    report.outcome = "rerun"


def pytest_report_teststatus(report):
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})
    return None


def pytest_terminal_summary(terminalreporter):
    if crash_reruns:
        terminalreporter.write_sep("=", "re-run after their worker died (see the dump above)")
        for nodeid in crash_reruns:
            terminalreporter.write_line(nodeid)
