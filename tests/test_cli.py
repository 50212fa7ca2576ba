"""The mjx-lite command: info, simulate (progress, steps/s, viewer file), bench, exit codes."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
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


def test_bench_runs_the_checkout_runner_or_builtin(capsys, monkeypatch, tmp_path):
    runner = REPO_ROOT / "benchmarks" / "run.py"
    if not runner.is_file():
        monkeypatch.chdir(tmp_path)
        assert cli.main(["bench"]) == 0
        assert "steps/s" in capsys.readouterr().out
        return
    # The checkout's runner, copied so that its results (written beside it) do not replace
    # the checkout's benchmarks/results; the smallest configuration it accepts.
    (tmp_path / "benchmarks").mkdir()
    shutil.copy(runner, tmp_path / "benchmarks" / "run.py")
    (tmp_path / "models").symlink_to(REPO_ROOT / "models")
    monkeypatch.chdir(tmp_path)
    assert cli._find_runner() == tmp_path / "benchmarks" / "run.py"
    assert cli.main(["bench", "--models", "pendulum", "--batches", "1", "--steps", "5",
                     "--no-mjx", "--no-factor"]) == 0
    assert "steps/s" in capsys.readouterr().out
    results = list((tmp_path / "benchmarks" / "results").glob("*"))
    assert any(r.suffix == ".md" for r in results), results
    if importlib.util.find_spec("matplotlib") is not None:  # the runner's PNG figure
        png = next(r for r in results if r.suffix == ".png")
        assert png.read_bytes().startswith(b"\x89PNG")


def test_builtin_bench(capsys):
    assert cli._builtin_bench([]) == 0
    assert "steps/s" in capsys.readouterr().out


def test_missing_collider_is_a_notice_in_info_and_an_error_in_simulate(tmp_path, monkeypatch,
                                                                       capsys):
    from mjx_lite.collision import driver

    real = driver.collider
    monkeypatch.setattr(driver, "collider", lambda m, types, *a, **k: None
                        if tuple(int(t) for t in types) == (0, 2) else real(m, types, *a, **k))
    path = tmp_path / "ball.xml"
    path.write_text("<mujoco><worldbody><geom type='plane' size='1 1 1'/><body pos='0 0 1'>"
                    "<freejoint/><geom type='sphere' size='0.1'/></body></worldbody></mujoco>")
    assert cli.main(["info", str(path)]) == 0
    assert "unsupported: collision plane-sphere (1 pairs)" in capsys.readouterr().out
    assert cli.main(["simulate", str(path), "--steps", "2"]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("mjx-lite: error: unsupported: mjx_lite has no collider yet for "
                          "plane-sphere (1 pairs)"), err


def _script() -> str:
    """The ``mjx-lite`` console script pip installed beside this interpreter."""
    exe = shutil.which("mjx-lite", path=str(pathlib.Path(sys.executable).parent))
    assert exe, "pip install -e . installs the mjx-lite script beside the interpreter"
    return exe


@pytest.mark.acceptance
def test_info_on_every_gymnasium_model(tmp_path):
    from test_viewer import write_report

    report, seen = [], set()
    paths = sorted(GYM_ASSETS.glob("*.xml"))
    assert len(paths) >= 10, GYM_ASSETS
    for path in paths:
        out = subprocess.run([_script(), "info", str(path)], capture_output=True, text=True)
        assert out.returncode == 0, (path.name, out.stderr[-2000:])
        lines = dict(line.strip().split(": ", 1) for line in out.stdout.splitlines()[1:])
        for key in ("compile", "sizes", "integrator", "solver", "joints", "geoms",
                    "unsupported"):
            assert key in lines, (path.name, key)
        seen |= set(lines) - {"compile", "sizes", "timestep", "unsupported"}
        report.append(f"{path.name}: {len(lines) - 4} feature lines, compile "
                      f"{lines['compile']}, unsupported: {lines['unsupported']}")
    report.insert(0, f"mjx-lite info on {len(paths)} gymnasium models: all exit 0; feature "
                     f"topics seen: {', '.join(sorted(seen))}")
    # Bad input through the installed script: one line on stderr, exit code 2.
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><body></worldbody></mujoco>")
    for label, path in (("missing file", tmp_path / "missing.xml"), ("malformed XML", bad)):
        for command in ("info", "simulate"):
            out = subprocess.run([_script(), command, str(path)], capture_output=True, text=True)
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr
            line = lines[0].replace(f"{tmp_path}/", "")
            report.append(f"bad input ({label}, {command}): exit {out.returncode}, "
                          f"{len(lines)} line: {line[:100]}")
    write_report("info", report)


@pytest.mark.acceptance
def test_simulate_humanoid_1000_steps_batch_64(tmp_path):
    """From a fresh install: a wheel built from the checkout, installed into an empty folder
    (dependencies from this environment), its ``mjx-lite`` script run outside the checkout."""
    from test_viewer import MIN_BODY_Z, decode_poses, write_report

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path / "dist"), str(REPO_ROOT)], check=True, timeout=600)
    wheel = next((tmp_path / "dist").glob("mjx_lite-*.whl"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True, timeout=600)
    script = site / "bin" / "mjx-lite"
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import mjx_lite; print(mjx_lite.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert where.stdout.startswith(str(site)), where.stdout

    model = MODELS_DIR / "humanoid_like.xml"
    html = tmp_path / "out.html"
    argv = [str(script), "simulate", str(model), "--steps", "1000", "--batch", "64",
            "--ctrl", "random", "--html", str(html)]
    # A hang guard, not a requirement: on 2 shared CPU cores the run with contacts takes ~1 h.
    out = subprocess.run(argv, capture_output=True, text=True, timeout=4 * 3600, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    rate = next(line for line in out.stdout.splitlines() if "steps/s" in line)
    phases = [p.strip() for p in out.stderr.replace("\r", "\n").splitlines()
              if "done in" in p]
    size = html.stat().st_size
    assert size < 10_000_000
    xpos, _ = decode_poses(html.read_text())
    z = xpos[..., 2].min()
    assert z > MIN_BODY_Z, z  # contacts on: the floor holds every recorded member
    write_report("cli", [
        f"fresh install: {wheel.name} into an empty --target folder, its bin/mjx-lite run",
        f"simulate humanoid_like --steps 1000 --batch 64 --ctrl random --html: {rate}",
        "phases: " + "; ".join(phases),
        f"viewer file {size / 1e6:.2f} MB ({xpos.shape[1]} batch members, int16); contacts on, "
        f"lowest body origin z over the recorded members = {z:.3f} m"])
