"""The framework example (examples/experiment/framework_agent.py, OpenAI Agents SDK): once straight at the
demo upstream, once through `brownout experiment run exp-framework.yaml` and the real proxy."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from brownout.proxy.experiment.cli import experiment
from tests.experiment.conftest import needs_proxy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "experiment"
AGENT = EXAMPLES / "framework_agent.py"
EXPERIMENT = EXAMPLES / "exp-framework.yaml"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def _has_agents_sdk() -> bool:
    try:
        importlib.metadata.version("openai-agents")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(
        not _has_agents_sdk(), reason="the OpenAI Agents SDK (pip install openai-agents) is not installed"
    ),
    pytest.mark.timeout(150),
]


def test_framework_agent_direct(demo_env: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    env["DEMO_UPSTREAM"] = demo_env
    done = subprocess.run(
        [sys.executable, str(AGENT), "Tokyo"], env=env, cwd=EXAMPLES, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ANSWER: "), done.stdout
    assert "18" in done.stdout  # the mock weather tool's temperature made it into the answer


@needs_proxy
def test_framework_experiment(tmp_path: Path, demo_env: str, confdir: str) -> None:
    res = CliRunner().invoke(
        experiment, ["run", str(EXPERIMENT), "--out", str(tmp_path), "--no-progress", "--confdir", confdir]
    )
    report_file = tmp_path / "report.json"
    assert report_file.exists(), res.output
    report = json.loads(report_file.read_text())
    assert res.exit_code == report["exit_code"], res.output
    assert report["status"] in ("completed", "deviated"), (report.get("error"), report.get("abort_reason"))
    assert [p["label"] for p in report["phases"]] == ["baseline", "chaos"]
    base = report["phases"][0]
    assert base["runs"] == 4 and base["passed"] == 4, base["statuses"]
    assert base["faults"] == 0 and base["llm_calls_per_run"] >= 2  # every run went through the proxy
    assert (tmp_path / "report.md").exists() and (tmp_path / "junit.xml").exists()
