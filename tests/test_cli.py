"""The mjx-lite command: info, simulate (progress, steps/s, viewer file), bench, exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mjx_lite import cli

from conftest import GYM_ASSETS, MODELS_DIR, REPO_ROOT

PENDULUM = REPO_ROOT / "mjx_lite" / "assets" / "pendulum.xml"


def test_info_lists_sizes_and_features(capsys):
    assert cli.main(["info", str(MODELS_DIR / "humanoid_like.xml")]) == 0
    out = capsys.readouterr().out
    for text in ("compile:", "nbody=17", "joints: ball x5, free x1, hinge x11",
                 "geoms:", "capsule", "actuator gain:", "unsupported:"):
        assert text in out, text


@pytest.mark.parametrize("xml, message", [
    (None, "file not found"),
    ("<mujoco><worldbody><geom type='bogus'/></worldbody></mujoco>", "bogus"),
    ("<mujoco><worldbody><body></worldbody></mujoco>", "bad.xml"),
])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, xml, message):
    path = tmp_path / "bad.xml"
    if xml is not None:
        path.write_text(xml)
    for command in ("info", "simulate"):
        out = subprocess.run([sys.executable, "-m", "mjx_lite.cli", command, str(path)],
                             capture_output=True, text=True)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
        assert lines[0].startswith("mjx-lite: error:") and message in lines[0]


def test_simulate_writes_viewer_and_prints_rate(tmp_path, capsys):
    html, png = tmp_path / "out.html", tmp_path / "heights.png"
    argv = ["simulate", str(PENDULUM), "--steps", "30", "--batch", "3", "--ctrl", "random",
            "--html", str(html), "--plot", str(png)]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "steps/s" in captured.out and "wrote" in captured.out
    assert "jit" in captured.err and "simulate" in captured.err  # the two progress phases
    text = html.read_text()
    assert '"T":30' in text and '"B":3' in text
    assert png.read_bytes().startswith(b"\x89PNG")


def test_bench_runs_the_checkout_runner_or_builtin(capsys, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    if cli._find_runner() is None:
        assert cli.main(["bench"]) == 0
    else:
        # The checkout's runner: the smallest configuration it accepts.
        assert cli.main(["bench", "--models", "pendulum", "--batches", "1", "--steps", "5",
                         "--no-mjx"]) == 0
    assert "steps/s" in capsys.readouterr().out


def test_builtin_bench(capsys):
    assert cli._builtin_bench([]) == 0
    assert "steps/s" in capsys.readouterr().out


@pytest.mark.acceptance
def test_info_on_every_gymnasium_model(capsys):
    for path in sorted(GYM_ASSETS.glob("*.xml")):
        assert cli.main(["info", str(path)]) == 0, path.name
        out = capsys.readouterr().out
        assert "joints:" in out and "geoms:" in out and "unsupported:" in out, path.name


@pytest.mark.acceptance
def test_simulate_humanoid_1000_steps_batch_64(tmp_path):
    import mjx_lite
    from mjx_lite.collision.driver import missing_colliders

    model = MODELS_DIR / "humanoid_like.xml"
    html = tmp_path / "out.html"
    argv = [sys.executable, "-m", "mjx_lite.cli", "simulate", str(model), "--steps", "1000",
            "--batch", "64", "--ctrl", "random", "--html", str(html)]
    missing = missing_colliders(mjx_lite.load_model(str(model)))
    if missing:  # the CLI is under test here, not collision coverage
        argv += ["--disable", "contact"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    rate = next(line for line in out.stdout.splitlines() if "steps/s" in line)
    size = html.stat().st_size
    assert size < 10_000_000
    from test_viewer import write_report

    write_report("cli", [
        f"simulate humanoid_like --steps 1000 --batch 64 --ctrl random --html: {rate}",
        f"viewer file {size / 1e6:.2f} MB (16 batch members, int16)"
        + (f"; contacts disabled (no collider yet: {', '.join(missing)})" if missing else "")])
