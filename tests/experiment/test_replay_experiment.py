"""Experiments on cassettes: record the example agent's runs once, then run every phase (chaos included)
from the recording with no upstream to reach, and measure reproducibility across repeated passes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.experiment.api import run_experiment
from brownout.proxy.experiment.reproducibility import reproducibility
from brownout.proxy.experiment.upstream import UpstreamConfig
from tests.experiment.builders import run as fake_run
from tests.experiment.conftest import needs_proxy

pytestmark = [needs_proxy, pytest.mark.timeout(300)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "experiment"
NOWHERE = "http://127.0.0.1:9"  # nothing listens there: a request that reached it would fail
# The proxy starts with the first phase's config: free ports, so parallel test runs never collide.
QUIET = "exporters: {prometheus: {listen: '127.0.0.1:0'}}\ncontrol: {listen: '127.0.0.1:0'}\n"
BASELINE = {"name": "baseline", "config": "quiet.yaml"}


def experiment(phases: list[dict[str, object]], **over: object) -> str:
    doc: dict[str, object] = {
        "name": "weather-on-tape",
        "seed": 11,
        "agent": {
            "command": [sys.executable, str(EXAMPLES / "agent.py"), "{task}"],
            "tasks": ["Paris", "Oslo"],
            "concurrency": 2,
            "timeout_s": 60,
            "success": {"stdout_regex": "^ANSWER: "},
        },
        "phases": phases,
        "baseline": "baseline",
        "gate": {"max_success_drop": 1.0},
    }
    doc.update(over)
    return yaml.safe_dump(doc)


def test_a_chaos_experiment_runs_on_cassettes_and_reproduces(
    tmp_path: Path, upstream_url: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_UPSTREAM", upstream_url)
    (tmp_path / "quiet.yaml").write_text(QUIET)
    recorded = run_experiment(
        experiment([BASELINE], upstream={"record": "cassettes"}),
        source="exp.yaml",
        base_dir=tmp_path,
        out_dir=tmp_path / "recording",
        confdir=confdir,
    )
    assert recorded.report["phases"][0]["success_rate"] == 1.0, recorded.report["runs"]
    assert sorted(p.name for p in (tmp_path / "cassettes").iterdir()) == ["baseline-1.jsonl", "baseline-2.jsonl"]

    monkeypatch.setenv("DEMO_UPSTREAM", NOWHERE)
    phases = [BASELINE, {"name": "llm", "config": str(EXAMPLES / "chaos-llm.yaml")}]
    outcome = run_experiment(
        experiment(phases, upstream={"replay": "cassettes", "replay_speed": 0}, reproducibility={"repeats": 3}),
        source="exp.yaml",
        base_dir=tmp_path,
        out_dir=tmp_path / "replay",
        confdir=confdir,
    )
    report = outcome.report
    base, llm = report["phases"]
    assert base["success_rate"] == 1.0, [r["stderr_tail"] for r in report["runs"]]
    assert llm["faults"] > 0  # the chaos config acted on the replayed answers
    assert report["upstream"] == {"replay": "cassettes", "replay_speed": 0.0}
    repro = report["reproducibility"]
    assert repro["repeats"] == 3 and repro["score"] == 1.0, repro["differing"]
    assert {p["phase"]: p["runs"] for p in repro["phases"]} == {"baseline": 2, "llm": 2}
    saved = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert saved["reproducibility"]["score"] == 1.0
    assert "**Reproducibility** 1.00 over 3 passes" in (tmp_path / "replay" / "report.md").read_text()


def test_the_cli_replays_an_experiment_without_an_upstream(
    tmp_path: Path, upstream_url: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_UPSTREAM", upstream_url)
    exp = tmp_path / "exp.yaml"
    exp.write_text(experiment([BASELINE]))
    (tmp_path / "quiet.yaml").write_text(QUIET)
    run = CliRunner().invoke(
        main,
        [
            "experiment",
            "run",
            str(exp),
            "--record",
            str(tmp_path / "tape"),
            "--out",
            str(tmp_path / "a"),
            "--confdir",
            confdir,
        ],
    )
    assert run.exit_code == 0, run.output
    monkeypatch.setenv("DEMO_UPSTREAM", NOWHERE)
    run = CliRunner().invoke(
        main,
        [
            "experiment",
            "run",
            str(exp),
            "--replay",
            str(tmp_path / "tape"),
            "--replay-speed",
            "0",
            "--reproducibility",
            "2",
            "--out",
            str(tmp_path / "b"),
            "--confdir",
            confdir,
        ],
    )
    assert run.exit_code == 0, run.output
    assert "reproducibility 1.00 over 2 passes" in run.output
    assert json.loads((tmp_path / "b" / "report.json").read_text())["phases"][0]["success_rate"] == 1.0
    # Without the cassettes the same runs fail: the upstream really is gone.
    CliRunner().invoke(main, ["experiment", "run", str(exp), "--out", str(tmp_path / "c"), "--confdir", confdir])
    assert json.loads((tmp_path / "c" / "report.json").read_text())["phases"][0]["success_rate"] == 0.0


def test_reproducibility_names_the_run_and_the_place_that_differed() -> None:
    from brownout.proxy.experiment.model import ExperimentResult

    def one_pass(status: str, outcome: str) -> tuple[ExperimentResult, list[dict[str, object]]]:
        result = ExperimentResult(name="x", seed=1)
        result.runs = [fake_run("chaos", 1, status), fake_run("chaos", 2, "passed")]
        decisions = [
            {"session": "chaos-1", "rule": "cut", "outcome": "fired", "fault": "truncate", "index": 0},
            {"session": "chaos-2", "rule": "cut", "outcome": outcome, "fault": "truncate", "index": 0},
        ]
        return result, decisions

    same = reproducibility([one_pass("passed", "fired"), one_pass("passed", "fired")])
    assert same["score"] == 1.0 and same["differing"] == []
    differs = reproducibility([one_pass("passed", "fired"), one_pass("failed", "skipped_probability")])
    assert differs["score"] == 0.0
    where = {d["run"]: d["where"] for d in differs["differing"]}
    assert where["chaos-1"].startswith("outcome passed")
    assert where["chaos-2"] == "decision 1: rule cut fired -> rule cut skipped_probability"


def test_upstream_section_is_validated() -> None:
    with pytest.raises(ValueError):
        UpstreamConfig(replay_miss="ignore")  # type: ignore[arg-type]
