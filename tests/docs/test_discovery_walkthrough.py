"""docs/discovery.md's walkthrough runs as written (tests/docs/walkthrough.py), so the experiment's exit
code (its gate) decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.docs.mdpages import DOCS
from tests.docs.walkthrough import UPSTREAM, run_walkthrough, sh_blocks

PAGE = DOCS / "discovery.md"


def _blocks() -> list[str]:
    return sh_blocks(PAGE)


def test_the_walkthrough_starts_the_upstream_first() -> None:
    blocks = _blocks()
    assert blocks[0].strip() == UPSTREAM
    assert all("127.0.0.1:8000" in b for b in blocks if "demo.agent" in b)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_walkthrough_runs(tmp_path: Path) -> None:
    run = run_walkthrough(PAGE, tmp_path, timeout_s=560)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    # The same inventory from the log, the cassettes, the control API, and once more with --out.
    assert run.stdout.count("get_weather: 2 calls via openai") == 4
    assert "exp.yaml: ok (experiment, 10 phases" in run.stdout
    report = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert report["gate"]["passed"] and report["experiment"] == "discovered"
    # Priced in dollars phase by phase, with the cost of chaos per fault type (the page's last bullet).
    assert report["cost_usd"]["baseline_per_run"] > 0
    assert all(p["cost_usd_per_run"] > 0 for p in report["phases"])
    assert any(c["extra_cost_usd_per_run"] is not None for c in report["cost_of_chaos"].values())
    assert "### Cost of chaos" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    # The generated phases ran as generated: a clean baseline, and each chaos phase fires only its own family.
    generated = yaml.safe_load((tmp_path / "exp.yaml").read_text(encoding="utf-8"))
    rules = {p["name"]: {r["name"] for r in p.get("rules", [])} for p in generated["phases"]}
    phases = {p["name"]: p for p in report["phases"]}
    assert list(phases) == list(rules)
    assert phases["baseline"]["faults"] == 0 and phases["baseline"]["success_rate"] == 1.0
    assert sum(p["faults"] for p in phases.values()) > 0
    for name, phase in phases.items():
        assert set(phase["faults_per_rule"]) <= rules[name], name
