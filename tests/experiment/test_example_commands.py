"""Every command an example states in its header runs verbatim, with nothing started by hand.

Commands are read from the examples themselves: the leading comment block of each YAML file, the module
docstring of each Python file (lines starting with `brownout ` or `python `), and the ```sh blocks of
examples/experiment/README.md. They run in order through bash, from a copy of the repository's
examples/ folder, with the virtualenv's `brownout` and `python` first on PATH. Each must exit 0, and an
`experiment run` must pass its gate. A command repeated in several files runs once.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.experiment.conftest import needs_proxy
from tests.experiment.test_reports import validate_junit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PREFIXES = ("brownout ", "python ")
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")

pytestmark = [needs_proxy, pytest.mark.timeout(600)]


def commands(path: Path) -> list[str]:
    """The run commands an example file states."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        blocks = re.findall(r"^```(?:sh|bash|shell)\n(.*?)^```", text, flags=re.M | re.S)
        return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    if path.suffix == ".py":
        lines = (ast.get_docstring(ast.parse(text)) or "").splitlines()
    else:  # YAML: the comment block before the first key
        lines = []
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            lines.append(line.lstrip("#"))
    return [line.strip() for line in lines if line.strip().startswith(PREFIXES)]


SOURCES = [
    *sorted((EXAMPLES / "experiment").glob("*.yaml")),
    *sorted((EXAMPLES / "experiment").glob("*.py")),
    EXAMPLES / "experiment" / "README.md",
    *sorted((EXAMPLES / "chaos").glob("*.yaml")),
]
WITH_COMMANDS = [p for p in SOURCES if commands(p)]


def test_every_runnable_example_says_how_to_run_it() -> None:
    runnable = {"exp.yaml", "exp-framework.yaml", "agent.py", "framework_agent.py", "README.md"}
    missing = runnable - {p.name for p in WITH_COMMANDS}
    assert not missing, f"no run command found in {sorted(missing)}"


class Workspace:
    """A copy of examples/ to run commands from; each distinct command runs once."""

    def __init__(self, root: Path, confdir: str) -> None:
        self.root = root
        shutil.copytree(EXAMPLES, root / "examples", ignore=shutil.ignore_patterns("*.png", "__pycache__"))
        venv_bin = Path(sys.executable).parent
        env = {k: v for k, v in os.environ.items() if k not in (*PROXY_VARS, "DEMO_UPSTREAM")}
        env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
        env["BROWNOUT_CONFDIR"] = confdir  # the CA directory only; the commands stay as written
        assert shutil.which("brownout", path=env["PATH"]) == str(venv_bin / "brownout"), "brownout is not installed"
        self.env = env
        self.done: dict[str, subprocess.CompletedProcess[str]] = {}

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        if command not in self.done:
            self.done[command] = subprocess.run(
                ["bash", "-c", command], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=400
            )
        return self.done[command]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, confdir: str) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("examples-root"), confdir)


def _out_dir(command: str) -> str | None:
    """The report directory of an `experiment run` command, else None."""
    argv = shlex.split(command, comments=True)
    if argv[:3] != ["brownout", "experiment", "run"]:
        return None
    return argv[argv.index("--out") + 1] if "--out" in argv else "brownout-report"


def check_report(out: Path) -> dict:
    """What every experiment run's report directory must hold after its gate passed."""
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "completed" and report["exit_code"] == 0, (report.get("error"), report["gate"])
    assert report["gate"]["passed"] and all(h["ok"] is not False for h in report["hypotheses"])
    base = next(p for p in report["phases"] if p["label"] == report["baseline"])
    assert base["faults"] == 0 and base["llm_calls_per_run"] >= 2  # every run went through the proxy
    assert sum(p["faults"] for p in report["phases"] if p["chaos"]) > 0
    assert all(s["stopped_by"] == "SIGTERM" and not s["exited_early"] for s in report["services"])
    for svc in report["services"]:
        assert (out / svc["log"]).stat().st_size > 0
    validate_junit(ET.parse(out / "junit.xml").getroot())
    html = (out / "report.html").read_text()
    assert html.count("<svg") == 4 and "://" not in html
    assert (out / "report.md").read_text().startswith("## brownout experiment")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["decision_log"]["count"] == len((out / "decisions.jsonl").read_text().splitlines())
    return report


@pytest.mark.slow
@pytest.mark.parametrize("source", WITH_COMMANDS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_commands_run_verbatim(source: Path, workspace: Workspace) -> None:
    for command in commands(source):
        done = workspace.run(command)
        assert done.returncode == 0, f"{command!r} exited {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
        out = _out_dir(command)
        if out is not None:
            check_report(workspace.root / out)


def test_example_experiment_report(workspace: Workspace) -> None:
    (command,) = [c for c in commands(EXAMPLES / "experiment" / "exp.yaml") if _out_dir(c)]
    assert workspace.run(command).returncode == 0
    report = check_report(workspace.root / _out_dir(command))
    assert [p["label"] for p in report["phases"]] == ["baseline", "llm", "tools", "recovery"]
    assert report["phases"][0]["runs"] == 6 and report["robustness"]["score"] is not None
    assert [s["name"] for s in report["services"]] == ["upstream"]
    assert report["manifest"]["seed"] == 7
