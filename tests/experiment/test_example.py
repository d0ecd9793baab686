"""The example experiment (examples/experiment) end to end through the real proxy, via the CLI."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from brownout.proxy.experiment.cli import experiment
from tests.experiment.conftest import needs_proxy
from tests.experiment.test_reports import validate_junit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "experiment" / "exp.yaml"

pytestmark = [needs_proxy, pytest.mark.timeout(300)]


def test_example_experiment_end_to_end(tmp_path: Path, demo_env: str, confdir: str) -> None:
    pytest.importorskip("openai")
    start = time.monotonic()
    res = CliRunner().invoke(
        experiment, ["run", str(EXAMPLE), "--out", str(tmp_path), "--no-progress", "--confdir", confdir]
    )
    elapsed = time.monotonic() - start
    report = json.loads((tmp_path / "report.json").read_text())
    assert res.exit_code == report["exit_code"], res.output
    assert report["status"] in ("completed", "deviated"), (report.get("error"), report.get("abort_reason"))
    assert elapsed < 120, f"the example must finish in under two minutes, took {elapsed:.0f} s"
    labels = [p["label"] for p in report["phases"]]
    assert labels == ["baseline", "llm", "tools", "recovery"]
    base = report["phases"][0]
    assert base["runs"] == 6 and base["faults"] == 0 and base["llm_calls_per_run"] >= 2
    assert sum(p["faults"] for p in report["phases"][1:3]) > 0
    assert report["robustness"]["score"] is not None
    validate_junit(ET.parse(tmp_path / "junit.xml").getroot())
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html and "://" not in html
    assert (tmp_path / "report.md").read_text().startswith("## brownout experiment")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["seed"] == 7 and len(manifest["phases"]) == 4
    assert manifest["decision_log"]["count"] == len((tmp_path / "decisions.jsonl").read_text().splitlines())
