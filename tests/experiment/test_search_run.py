"""Breaking-point searches through the real embedded proxy with the fast stdlib agent and the demo upstream.

(a) An agent whose client times out after 2 s, under latency on its LLM call: its breaking point is
2 s less the time a request spends in the proxy and the upstream (tens of milliseconds on a loaded
machine). (b) An agent that retries twice under a 500 with probability p (1 - p^3 succeed), recorded
once and searched again on the cassettes with no upstream: the same levels, the same estimate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.experiment.search.api import run_search
from brownout.proxy.experiment.search.runner import BYPASS
from brownout.proxy.experiment.upstream import UpstreamConfig
from tests.experiment.conftest import HERE, needs_proxy

pytestmark = [needs_proxy, pytest.mark.timeout(300)]

AGENT = [sys.executable, "-S", str(HERE / "fake_agent.py")]  # -S: stdlib only, a faster start
NOWHERE = "http://127.0.0.1:9"
QUIET = "exporters: {prometheus: {listen: '127.0.0.1:0'}}\ncontrol: {listen: '127.0.0.1:0'}\n"


def _file(search: dict[str, Any], env: dict[str, str], **over: Any) -> str:
    doc: dict[str, Any] = {
        "name": "search",
        "seed": 5,
        "agent": {
            "command": AGENT,
            "concurrency": 6,
            "timeout_s": 20,
            "env": env,
            "success": {"stdout_regex": "^ANSWER"},
        },
        "search": search,
        **over,
    }
    return yaml.safe_dump(doc)


def test_a_the_timeout_agents_breaking_point_is_its_2_s_timeout(tmp_path: Path, demo_env: str, confdir: str) -> None:
    search = {
        "rule": {"name": "slow-llm", "match": {"provider": "openai"}, "fault": {"type": "latency", "delay_ms": 0}},
        "parameter": "fault.delay_ms",
        "range": [250, 8000],
        "scale": "log",
        "goal": {"metric": "success_rate", "min": 0.8},  # a step: any goal breaks at the same point
        "tolerance": 0.1,
        "max_runs": 300,
        "gate": {"min_breaking_point": 1000},
    }
    text = _file(search, {"FAKE_TIMEOUT_S": "2"})
    done = run_search(text, source="exp.yaml", base_dir=tmp_path, out_dir=tmp_path / "out", confdir=confdir)
    report = done.report
    assert report["outcome"] == "found", report["summary"]
    bp = report["breaking_point"]
    low, high = bp["interval"]
    print(
        f"timeout 2 s: estimate {bp['estimate']:.0f} ms [{low:.0f}, {high:.0f}], {report['runs_spent']} runs, "
        f"a grid needs {report['grid']['runs']}"
    )
    assert abs(bp["estimate"] - 2000) <= 200
    assert low <= 2000 and high >= 2000 - 150  # 2 s, less the proxy's and upstream's share of the request
    assert report["runs_spent"] < report["grid"]["runs"] / 3
    assert report["exit_code"] == 0 and report["gate"]["passed"]
    assert all(lv["decision"] == "holds" for lv in report["levels"] if lv["value"] < 1800)
    assert all(lv["decision"] == "fails" for lv in report["levels"] if lv["value"] > 2050)

    out = tmp_path / "out"
    assert json.loads((out / "report.json").read_text())["kind"] == "search"
    assert report["summary"] in (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert html.count("<circle") == len(report["levels"])  # every level on the chart, with its interval
    assert html.count("<svg") == 1 and "breaking point interval" in html
    assert (out / "manifest.json").exists() and (out / "service-upstream.log").exists() is False


RETRY = {
    "rule": {
        "name": "llm-500",
        "match": {"provider": "openai"},
        "fault": {"type": "http_error", "status": 500},
        "schedule": {"probability": 0.0},
    },
    "parameter": "schedule.probability",
    "range": [0, 1],
    "resolution": 0.1,
    "goal": {"metric": "success_rate", "min": 0.9},
    "tolerance": 0.1,
    "max_runs": 40,
}


def test_b_a_search_on_cassettes_is_token_free_and_repeats_its_levels(
    tmp_path: Path, upstream_url: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "quiet.yaml").write_text(QUIET)
    monkeypatch.setenv("DEMO_UPSTREAM", upstream_url)
    text = _file(RETRY, {"FAKE_RETRIES": "2"})
    live = run_search(
        text,
        source="exp.yaml",
        base_dir=tmp_path,
        out_dir=tmp_path / "live",
        confdir=confdir,
        upstream=UpstreamConfig(record=str(tmp_path / "tape")),
    )
    assert live.report["status"] == "completed", live.report["error"]
    assert len(live.search.levels) >= 3 and live.report["runs_spent"] <= 40

    monkeypatch.setenv("DEMO_UPSTREAM", NOWHERE)  # a request that reached the upstream would fail
    exp = tmp_path / "exp.yaml"
    exp.write_text(_file({**RETRY, "gate": {"min_breaking_point": 0.95}}, {"FAKE_RETRIES": "2"}))
    args = ["experiment", "search", str(exp), "--replay", str(tmp_path / "tape"), "--replay-speed", "0"]
    cli = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "replay"), "--confdir", confdir, "--no-progress"])
    replayed = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert replayed["upstream"]["replay"] == str(tmp_path / "tape")
    assert replayed["sequence"] == live.report["sequence"]
    assert [(lv["runs"], lv["good"]) for lv in replayed["levels"]] == [
        (lv["runs"], lv["good"]) for lv in live.report["levels"]
    ]
    assert replayed["breaking_point"] == live.report["breaking_point"]
    assert cli.exit_code == 1, cli.output  # the lower end is far below 0.95: the gate fails
    assert "min_breaking_point" in cli.output and replayed["gate"]["passed"] is False


def test_an_agent_that_goes_around_the_proxy_errors_the_search(tmp_path: Path, demo_env: str, confdir: str) -> None:
    text = _file(RETRY, {"FAKE_DIRECT": "1"})
    done = run_search(text, source="exp.yaml", base_dir=tmp_path, out_dir=tmp_path / "out", confdir=confdir)
    assert done.report["status"] == "failed" and done.report["error"] == BYPASS
    assert done.exit_code == 2 and done.report["runs_spent"] == 6  # one batch at the safe end, then stop
