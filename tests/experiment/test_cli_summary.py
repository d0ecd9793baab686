"""`brownout experiment run`'s console summary says why baseline runs failed, not only that they did."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from rich.console import Console

from brownout.proxy.cli import main
from brownout.proxy.experiment.cli import _summary, baseline_failures, violation_causes
from tests.experiment.conftest import needs_proxy


def _run(run_id: str, label: str, status: str, reason: str, stderr: str) -> dict[str, str]:
    return {"run_id": run_id, "label": label, "task": "t", "status": status, "reason": reason, "stderr_tail": stderr}


def test_one_line_per_distinct_cause_of_a_failed_baseline_run() -> None:
    missing = "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'agents'\n\n"
    report = {
        "baseline": "baseline",
        "runs": [
            _run("baseline-0", "baseline", "failed", "exit code 1 (expected 0)", missing),
            _run("baseline-1", "baseline", "failed", "exit code 1 (expected 0)", missing),  # same cause: once
            _run("baseline-2", "baseline", "timeout", "timed out after 5 s", ""),
            _run("baseline-3", "baseline", "passed", "", "a warning\x1b"),
            _run("chaos-0", "chaos", "failed", "exit code 1 (expected 0)", "RateLimitError"),  # faults explain it
        ],
    }
    assert baseline_failures(report) == [
        "baseline-0 (t): exit code 1 (expected 0); stderr: ModuleNotFoundError: No module named 'agents'",
        "baseline-2 (t): timed out after 5 s",
    ]


def test_the_summary_names_each_invariant_violated_with_its_first_message() -> None:
    from tests.experiment.test_report_causes import report

    assert violation_causes(report()) == [
        "chaos: retry_discipline x2 (critical 1, error 1): retried a 429 after 0.0 s, retry-after asked 2 s",
        "chaos: latency_budget x3 (warning): total 9.9 s over budget 2 s",
    ]
    assert violation_causes(report(), limit=1)[1:] == ["... 1 more in report.md"]
    out = io.StringIO()
    _summary(Console(file=out, width=200), report(), Path("out"))
    assert "violated: chaos: latency_budget x3 (warning): total 9.9 s over budget 2 s" in out.getvalue()


@needs_proxy
@pytest.mark.timeout(120)
def test_the_summary_shows_an_agent_that_cannot_start(tmp_path: Path, confdir: str) -> None:
    exp = tmp_path / "exp.yaml"
    agent = [sys.executable, "-c", "import brownout_no_such_module"]
    doc = {"agent": {"command": agent, "tasks": ["t"], "runs_per_task": 1}, "phases": [{"name": "baseline"}]}
    exp.write_text(yaml.safe_dump(doc))
    args = ["experiment", "run", str(exp), "--out", str(tmp_path / "out"), "--confdir", confdir, "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert "No module named 'brownout_no_such_module'" in " ".join(result.output.split()), result.output


@needs_proxy
@pytest.mark.timeout(120)
def test_the_summary_says_when_the_agent_went_around_the_proxy(tmp_path: Path, confdir: str, demo_env: str) -> None:
    exp = tmp_path / "exp.yaml"
    direct = "import httpx, os; httpx.get(os.environ['DEMO_UPSTREAM'] + '/ping', trust_env=False); print('ANSWER')"
    doc = {
        "agent": {"command": [sys.executable, "-c", direct], "tasks": ["t"], "runs_per_task": 2},
        "phases": [{"name": "baseline"}, {"name": "chaos", "rules": [{"name": "r", "fault": {"type": "reset"}}]}],
    }
    exp.write_text(yaml.safe_dump(doc))
    args = ["experiment", "run", str(exp), "--out", str(tmp_path / "out"), "--confdir", confdir, "--no-progress"]
    result = CliRunner().invoke(main, args)
    said = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "the agent's requests reach brownout before the chaos" in said
    assert "no request of the agent reached brownout; usual causes: the client ignores HTTP(S)_PROXY" in said
