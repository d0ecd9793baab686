"""compare flags a significant regression and exits 1; equal reports pass."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
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
    # 40/50 vs 20/50: Fisher's exact test gives p = 8.31e-5 (scipy.stats.fisher_exact)
    assert chaos["regression"] and chaos["p_value"] == pytest.approx(8.3087e-5, rel=1e-4)
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


def test_small_sample_drop_is_not_a_regression(tmp_path: Path) -> None:
    # 10/10 -> 6/10: a pooled z-test says p = 0.025; the exact p is 0.0867, so compare exits 0.
    a = make_report()
    a["phases"][1]["runs"], a["phases"][1]["passed"] = 10, 10
    a["chaos_pooled"].update(n=10, k=10)
    b = copy.deepcopy(a)
    b["phases"][1]["passed"] = 6
    b["chaos_pooled"].update(k=6)
    row = next(r for r in compare_reports(a, b)["phases"] if r["phase"] == "chaos")
    assert row["delta"] == pytest.approx(-0.4) and row["p_value"] == pytest.approx(0.0867, abs=5e-5)
    assert not row["regression"]
    write_json(tmp_path / "a.json", a)
    write_json(tmp_path / "b.json", b)
    res = CliRunner().invoke(experiment, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert res.exit_code == 0, res.output


def test_a_staging_report_and_a_command_experiments_do_not_compare(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", make_report())
    write_json(tmp_path / "b.json", {**make_report(), "kind": "staging"})
    res = CliRunner().invoke(experiment, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert res.exit_code == 2
    assert "only B is a staging experiment's report: compare two reports of one kind" in " ".join(res.output.split())


def test_staging_phases_compare_their_exchanges_answered() -> None:
    def staging(errors: int) -> dict:
        phase = {"label": "outage", "chaos": True, "figures": {"exchanges": 200.0, "errors": float(errors)}}
        base = {"label": "baseline", "chaos": False, "figures": {"exchanges": 200.0, "errors": 2.0}}
        return {"kind": "staging", "phases": [base, phase], "hypotheses": []}

    result = compare_reports(staging(20), staging(60))
    outage = next(r for r in result["phases"] if r["phase"] == "outage")
    # 180/200 vs 140/200 answered: Fisher's exact test, p = 7.14e-7 (scipy.stats.fisher_exact)
    assert outage["a"]["rate"] == 0.9 and outage["b"]["rate"] == 0.7
    assert outage["p_value"] == pytest.approx(7.1407e-7, rel=1e-3) and outage["regression"]
    assert [r["phase"] for r in result["phases"]] == ["baseline", "outage", "chaos (pooled)"]
    assert not compare_reports(staging(20), staging(20))["regression"]
