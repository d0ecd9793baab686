"""`pip install` of the wheel alone (no lock, no extras) gives a working CLI, demo, exec and experiment.

The suite itself runs from the lock with the test extras, which would hide a dependency only a test
tool brings; this installs the built wheel into a fresh venv from the package index and runs the
commands a new user runs first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
CHILD = "import httpx, os; print(httpx.get(os.environ['DEMO'] + '/tools/weather?city=Oslo').status_code)"


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)  # type: ignore[call-overload,no-any-return]


# The module fixture installs every runtime dependency into a new venv; its time counts against
# whichever test asks first, and it is slow on a loaded machine.
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """bin/ of a fresh venv with only the brownout wheel and what it declares."""
    tmp = tmp_path_factory.mktemp("plain-install")
    wheel = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(ROOT)])
    assert wheel.returncode == 0, wheel.stderr
    (whl,) = (tmp / "dist").glob("brownout-*.whl")
    # pip itself is not part of what a plain install promises: this pip installs into the new venv
    # (--python) instead of bootstrapping a copy there first, which cost a few seconds.
    venv.EnvBuilder(with_pip=False).create(tmp / "venv")
    bin_dir = tmp / "venv" / "bin"
    pip = [sys.executable, "-m", "pip", "--python", str(bin_dir / "python")]
    install = _run([*pip, "install", "-q", "--disable-pip-version-check", str(whl)])
    assert install.returncode == 0, install.stderr
    yield bin_dir


def _env(bin_dir: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("BROWNOUT")}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "HOME": str(home)}


def test_the_wheel_installs_nothing_but_brownout_under_one_namespace(installed: Path) -> None:
    site = _run([str(installed / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    top = {p.name for p in Path(site.stdout.strip()).iterdir() if p.is_dir() and not p.name.endswith("-info")}
    assert "brownout" in top and not {"proxy", "faults", "invariants", "exporters", "core"} & top


def test_help_demo_exec_and_an_experiment_work_after_a_plain_install(installed: Path, tmp_path: Path) -> None:
    env = _env(installed, tmp_path)
    brownout = str(installed / "brownout")
    assert _run([brownout, "--help"], env=env).returncode == 0
    demo = _run([brownout, "demo"], env=env, cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "final answer" in demo.stdout

    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: plain-install
        services:
          - name: demo
            command: ["{{python}}", "-m", "brownout.proxy.demo.upstream", "--port", "{{port}}", "--no-record"]
            ready: {{http: "http://127.0.0.1:{{port}}/ping"}}
            export: {{DEMO: "http://127.0.0.1:{{port}}"}}
        agent:
          command: ["{{python}}", "-c", "{CHILD}"]
          tasks: ["weather"]
          runs_per_task: 2
          success: {{stdout_regex: "^200"}}
        phases:
          - name: baseline
          - name: slow-tools
            rules:
              - {{name: slow, match: {{path: "/tools/*"}}, fault: {{type: latency, delay_ms: 50}}}}
        gate: {{min_success_rate: 1.0}}
        """)
    )
    run = _run(
        [brownout, "experiment", "run", str(experiment), "--out", str(tmp_path / "report")], env=env, cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "report" / "report.html").is_file()

    exec_ = _run(
        [brownout, "exec", "--", str(installed / "python"), "-c", "import os; print(os.environ['HTTPS_PROXY'])"],
        env=env,
        cwd=tmp_path,
    )
    assert exec_.returncode == 0 and exec_.stdout.startswith("http://127.0.0.1:"), exec_.stdout + exec_.stderr


def test_run_proxies_after_a_plain_install(installed: Path, tmp_path: Path, upstream: Any) -> None:
    env = _env(installed, tmp_path)
    port = free_port()
    free = ["--set", "brownout_metrics_listen=127.0.0.1:0", "--set", "brownout_control_listen=127.0.0.1:0"]
    proc = subprocess.Popen(
        [str(installed / "brownout"), "run", "--listen", f"127.0.0.1:{port}", *free],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port, proc)
        fetch = f"import httpx; print(httpx.get('{upstream.url}/tools/weather?city=Oslo', proxy='http://127.0.0.1:{port}').json()['city'])"
        got = _run([str(installed / "python"), "-c", fetch], env=env)
        assert got.stdout.strip() == "Oslo", got.stderr
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and f"listening on http://127.0.0.1:{port}" in out + err, out + err
