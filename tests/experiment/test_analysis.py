"""Analysis, hypotheses, gate and verdict on a hand-built fixture (values worked out in builders.py)."""

from __future__ import annotations

import pytest

from brownout.proxy.experiment.analysis import analyze
from brownout.proxy.experiment.config import BASELINE_PROXIED, BASELINE_WORKS
from brownout.proxy.experiment.verdict import check_hypotheses, evaluate_gate, verdict
from tests.experiment.builders import config, fixture_result, run


@pytest.fixture
def analysis() -> dict:
    return analyze(fixture_result(), config())


def test_phase_stats(analysis: dict) -> None:
    base, chaos = analysis["phases"]
    assert (base["runs"], base["passed"], base["success_rate"]) == (10, 10, 1.0)
    assert base["success_ci95"][0] == pytest.approx(0.7225, abs=1e-4)
    assert chaos["success_ci95"] == pytest.approx([0.4902, 0.9433], abs=1e-4)
    assert chaos["duration_s"]["p50"] == 5.5 and chaos["duration_s"]["p95"] == pytest.approx(9.55)
    assert chaos["calls_per_run"] == pytest.approx(2.2)
    assert chaos["tokens_per_run"] == pytest.approx(14.0)
    assert chaos["violations"]["by_severity"]["error"] == 1
    assert chaos["violations"]["by_invariant"] == {"retry_discipline": {"error": 1}}
    assert chaos["faults_per_rule"] == {"r-http_error": 4, "r-reset": 2}


def test_success_drop_and_exact_test(analysis: dict) -> None:
    vs = analysis["phases"][1]["vs_baseline"]
    assert vs["drop"] == pytest.approx(0.2)
    # 10/10 vs 8/10: the tables with 18 successes weigh 45, 100, 45 of C(20, 18) = 190; two-sided 90/190.
    assert vs["test"] == "fisher_exact" and vs["p_value"] == pytest.approx(90 / 190)
    assert vs["significant"] is False


def test_recovery_robustness_cost_breakdown(analysis: dict) -> None:
    assert (analysis["recovery"]["k"], analysis["recovery"]["n"]) == (4, 6)
    # http_error runs weigh 1.0 (3 of 4 passed), reset runs 1.5 (1 of 2): (3 + 1.5) / (4 + 3)
    assert analysis["robustness"]["score"] == pytest.approx(4.5 / 7)
    cost = analysis["cost_of_chaos"]
    assert cost["http_error"] == {
        "faulted_exchanges": 4,
        "retried_exchanges": 4,
        "retry_tokens": 20,
        "extra_calls_per_run": 1.0,
        "extra_tokens_per_run": pytest.approx(-5.0),
        "retry_cost_usd": pytest.approx(4 * 5e-4),
        "extra_cost_usd_per_run": pytest.approx(1.5e-3 - 2e-3),
    }
    assert cost["reset"]["extra_calls_per_run"] == -1.0
    assert cost["reset"]["retry_cost_usd"] is None and cost["reset"]["extra_cost_usd_per_run"] is None  # never priced
    # Chaos runs: 4 at $0.0015, 2 that never reached upstream, 4 at $0.002; baseline runs $0.002 each.
    assert analysis["cost_usd"] == {
        "baseline_per_run": pytest.approx(2e-3),
        "chaos_per_run": pytest.approx(1.4e-3),
        "extra_per_run": pytest.approx(-6e-4),
        "chaos_total": pytest.approx(1.4e-2),
    }
    assert analysis["phases"][1]["cost_usd_per_run"] == pytest.approx(1.4e-3)
    rows = {(r["fault"], r["target"]): (r["runs"], r["failed"], r["rate"]) for r in analysis["fault_breakdown"]}
    assert rows == {("http_error", "get_weather"): (4, 1, 0.25), ("reset", "openai"): (2, 1, 0.5)}


def test_hypotheses_and_status(analysis: dict) -> None:
    cfg = config(
        steady_state=[
            {"metric": "success_rate", "op": ">=", "threshold": 0.95, "scope": "before"},
            {"metric": "success_rate", "op": ">=", "threshold": 0.9, "scope": "during"},
            {"metric": "p95_duration_s", "op": "<=", "threshold": 20, "phase": "chaos"},
        ]
    )
    hyp = check_hypotheses(cfg, analysis["phases"])
    assert [h["ok"] for h in hyp] == [True, False, True, True, True]  # the last two: baseline_must_succeed's
    assert [h["hypothesis"] for h in hyp[-2:]] == [BASELINE_WORKS, BASELINE_PROXIED]
    gate = evaluate_gate(cfg, analysis)
    assert verdict("completed", None, hyp, gate) == ("deviated", 1)
    assert verdict("aborted", None, hyp, gate) == ("aborted", 2)
    assert verdict("completed", "boom", [], gate) == ("failed", 2)
    before_fails = [dict(hyp[0], ok=False)]
    assert verdict("completed", None, before_fails, gate) == ("failed", 1)


def test_gate(analysis: dict) -> None:
    ok = evaluate_gate(
        config(
            gate={
                "min_success_rate": 0.8,
                "max_success_drop": 0.2,
                "min_robustness": 0.6,
                "max_violations": {"error": 1},
            }
        ),
        analysis,
    )
    assert ok["passed"], ok
    bad = evaluate_gate(config(gate={"min_robustness": 0.7, "max_violations": {"error": 0}}), analysis)
    assert not bad["passed"]
    assert [c["ok"] for c in bad["checks"]] == [False, False]
    assert verdict("completed", None, [], bad) == ("completed", 1)
    assert verdict("completed", None, [], ok) == ("completed", 0)


def test_an_agent_that_never_succeeds_before_the_chaos_fails_the_experiment() -> None:
    # No hypothesis, no gate: without baseline_must_succeed this would pass at 0% success.
    result = fixture_result()
    result.runs = [run("baseline", i, "failed") for i in range(1, 4)] + [r for r in result.runs if r.phase == "chaos"]
    bare = config()
    hyp = check_hypotheses(bare, analyze(result, bare)["phases"])
    assert [(h["hypothesis"], h["ok"], h["scope"]) for h in hyp] == [
        (BASELINE_WORKS, False, "before"),
        (BASELINE_PROXIED, True, "before"),
    ]
    assert verdict("completed", None, hyp, evaluate_gate(bare, analyze(result, bare))) == ("failed", 1)
    off = config(baseline_must_succeed=False)
    assert check_hypotheses(off, analyze(result, off)["phases"]) == []
    assert verdict("completed", None, [], evaluate_gate(off, analyze(result, off))) == ("completed", 0)


def test_with_no_chaos_phase_every_phase_must_have_a_success() -> None:
    result = fixture_result()
    result.phases = result.phases[:1]
    result.runs = [run("baseline", i, "failed") for i in range(1, 4)]
    only_baseline = config(phases=[{"name": "baseline"}])
    hyp = check_hypotheses(only_baseline, analyze(result, only_baseline)["phases"])
    assert [h["ok"] for h in hyp] == [False, True]
