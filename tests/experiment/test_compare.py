"""compare flags a significant regression and exits 1; equal reports pass."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from click.testing import CliRunner

from brownout.proxy.experiment.cli import experiment
from brownout.proxy.experiment.compare import compare_reports
from brownout.proxy.experiment.report_json import write_json
from tests.experiment.test_reports import make_report


def _regressed(report: dict) -> dict:
    worse = copy.deepcopy(report)
    for p in worse["phases"]:
        if p["label"] == "chaos":
            p["runs"], p["passed"] = 50, 20  # 40% instead of 80%
    worse["chaos_pooled"].update(n=50, k=20)
    return worse


def test_compare_detects_injected_regression() -> None:
    a = make_report()
    a["phases"][1]["runs"], a["phases"][1]["passed"] = 50, 40
    a["chaos_pooled"].update(n=50, k=40)
    result = compare_reports(a, _regressed(a))
    chaos = next(r for r in result["phases"] if r["phase"] == "chaos")
    # 40/50 vs 20/50: pooled 0.6, z = 0.4 / sqrt(.24 * .04) = 4.08
    assert chaos["regression"] and chaos["p_value"] < 0.001
    assert result["regression"]
    assert not compare_reports(a, a)["regression"]


def test_compare_cli_exit_codes(tmp_path: Path) -> None:
    a = make_report()
    a["phases"][1]["runs"], a["phases"][1]["passed"] = 50, 40
    a["chaos_pooled"].update(n=50, k=40)
    write_json(tmp_path / "a.json", a)
    write_json(tmp_path / "b.json", _regressed(a))
    runner = CliRunner()
    res = runner.invoke(experiment, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"])
    assert res.exit_code == 1, res.output
    assert json.loads(res.output)["regression"] is True
    assert runner.invoke(experiment, ["compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")]).exit_code == 0
    (tmp_path / "junk.json").write_text("{}")
    assert runner.invoke(experiment, ["compare", str(tmp_path / "a.json"), str(tmp_path / "junk.json")]).exit_code == 2
