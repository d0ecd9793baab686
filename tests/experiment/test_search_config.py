"""The `search:` section: validation at load (field and line), `brownout validate`, the goal's good runs,
and the gate and exit code the report derives from a search's outcome."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.experiment.api import run_experiment
from brownout.proxy.experiment.config import ExperimentError, parse_experiment
from brownout.proxy.experiment.model import ExperimentResult
from brownout.proxy.experiment.search.algorithm import Level, SearchResult
from brownout.proxy.experiment.search.goal import is_good
from brownout.proxy.experiment.search.report import build_search_report
from brownout.proxy.experiment.search.report_html import render_search_html
from brownout.proxy.experiment.search.report_md import render_search_markdown
from brownout.proxy.experiment.staging.config import parse_any_experiment
from tests.experiment.builders import run

SEARCH = """\
version: 1
agent: {command: [python, agent.py]}
search:
  rule: {name: slow-llm, match: {provider: openai}, fault: {type: latency, delay_ms: 0}}
  parameter: fault.delay_ms
  range: [0, 20000]
  scale: log
  goal: {metric: success_rate, min: 0.9}
  gate: {min_breaking_point: 1500}
"""


def test_the_issue_example_is_valid_and_brownout_validate_says_what_it_searches(tmp_path: Path) -> None:
    config = parse_experiment(SEARCH)
    assert config.search is not None and config.phases == [] and not config.search.integer
    exp = tmp_path / "exp.yaml"
    exp.write_text(SEARCH)
    result = CliRunner().invoke(main, ["validate", str(exp)])
    assert result.exit_code == 0, result.output
    assert "a search over fault.delay_ms from 0 to 20000 for success_rate >= 0.9" in result.output


@pytest.mark.parametrize(
    ("old", "new", "where", "message"),
    [
        ("fault.delay_ms\n", "fault.nope\n", ":6: search.range", "fault.nope: Extra inputs are not permitted"),
        ("[0, 20000]", "[0, 99999999]", ":6: search.range", "delay_ms: Input should be less than or equal to"),
        ("fault.delay_ms\n", "match.stream\n", ":6: search.range", "match.stream is not a numeric field"),
        ("[0, 20000]", "[5, 1]", ":6: search.range", "low (5) must be below high (1)"),
        ("scale: log", "scale: sqrt", ":7: search.scale", "'linear' or 'log'"),
        ("min: 0.9}", "max: 0.9}", ":8: search.goal", "goal success_rate takes min (only)"),
        ("min: 0.9}", "min: 1.0}", ":8: search.goal", "between 0 and 1"),
    ],
)
def test_a_bad_search_names_its_field_and_line(tmp_path: Path, old: str, new: str, where: str, message: str) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(SEARCH.replace(old, new, 1))
    result = CliRunner().invoke(main, ["validate", str(exp)])
    assert result.exit_code == 1
    assert f"{exp}{where}" in result.output and message in result.output, result.output


def test_an_integer_parameter_needs_whole_numbers_and_a_file_needs_phases_or_a_search() -> None:
    text = SEARCH.replace("type: latency, delay_ms: 0", "type: truncate, after_events: 1").replace(
        "fault.delay_ms", "fault.after_events"
    )
    assert parse_experiment(text.replace("[0, 20000]", "[0, 20]")).search.integer  # type: ignore[union-attr]
    with pytest.raises(ExperimentError, match=r"after_events = 20.5: .*valid integer"):
        parse_experiment(text.replace("[0, 20000]", "[0, 20.5]"))
    with pytest.raises(ExperimentError, match=r"phases: .*give at least one phase .* or a search"):
        parse_experiment("version: 1\nagent: {command: x}\n")


def test_experiment_run_refuses_a_file_with_only_a_search_and_a_staging_file_refuses_a_search(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match=r"no phases to run .*brownout experiment search"):
        run_experiment(SEARCH, source="exp.yaml", base_dir=tmp_path, out_dir=tmp_path / "out")
    staging = "version: 1\ntarget: {control: ['http://127.0.0.1:9465']}\nphases: [{name: b, duration_s: 1}]\n"
    with pytest.raises(ExperimentError, match="search: not with a target"):
        parse_any_experiment(staging + "search: {}\n")


def test_goals_judge_each_run() -> None:
    goal = lambda **g: (
        parse_experiment(
            SEARCH.replace("{metric: success_rate, min: 0.9}", yaml.safe_dump(g, default_flow_style=True).strip())
        ).search.goal
    )  # type: ignore[union-attr]
    slow, ok = run("L00", 1, "passed", duration=4.0), run("L00", 2, "timeout", duration=1.0)
    assert is_good(goal(metric="success_rate", min=0.9), slow) and not is_good(goal(metric="success_rate", min=0.9), ok)
    assert not is_good(goal(metric="timeout_rate", max=0.1), ok)
    p95 = goal(metric="p95_duration_s", max=3)
    assert p95.target == 0.95 and not is_good(p95, slow) and is_good(p95, ok)
    calls = goal(metric="calls_per_run", max=1, share=0.8)
    assert calls.target == 0.8 and is_good(calls, slow)  # one exchange
    assert goal(metric="error_rate", max=0.05).target == pytest.approx(0.95)
    with pytest.raises(ExperimentError, match="per run: give share"):
        goal(metric="tokens_per_run", max=100)


def _report(outcome: str, interval_u: tuple[float, float] = (0.4, 0.5), gate: str = "") -> dict[str, object]:
    from brownout.proxy.experiment.search.fit import Fit

    config = parse_experiment(SEARCH.replace("gate: {min_breaking_point: 1500}", gate or "batch: 4"))
    levels = [Level(0, 0.0, 20.0, [True] * 18, "holds"), Level(1, 1.0, 20000.0, [False] * 4, "fails")]
    fit = Fit("logistic", sum(interval_u) / 2, interval_u, 30.0, None, [(0.0, 1.0), (1.0, 0.0)])
    search = SearchResult(outcome, levels, fit if outcome == "found" else None, 22, (0.0, 1.0))
    result = ExperimentResult(name="s", seed=1, started_at=1.0, finished_at=2.0)
    return build_search_report(result, search, config, {"live": True})


def test_the_gate_reads_the_interval_and_the_exit_code_follows_it() -> None:
    # u 0.4..0.5 of a log range 20..20000 is 318..631 ms
    assert _report("found")["exit_code"] == 0  # no gate
    low = _report("found", gate="gate: {min_breaking_point: 300}")
    assert low["exit_code"] == 0 and low["breaking_point"]["interval"][0] == pytest.approx(20 * 1000**0.4)
    assert (
        _report("found", gate="gate: {min_breaking_point: 400}")["exit_code"] == 1
    )  # the estimate is above, the interval is not
    assert _report("holds_across_range", gate="gate: {min_breaking_point: 20000}")["exit_code"] == 0
    fails = _report("fails_across_range", gate="gate: {min_breaking_point: 1}")
    assert fails["exit_code"] == 1 and fails["breaking_point"]["interval"] == [None, 20.0]
    assert "misses its goal (success_rate >= 0.9) even at the mildest level of the range, fault.delay_ms = 0" in str(
        fails["summary"]
    )


def test_the_reports_show_every_level_and_what_a_grid_would_have_spent() -> None:
    report = _report("found")
    assert report["grid"] == {"levels": 143, "runs_per_level": 93, "runs": 143 * 93, "ratio": 22 / (143 * 93)}
    md = render_search_markdown(report)
    assert "| 1 (L00) | 20 | 18 | 18 | 100.0% [82.4%, 100.0%] | holds |" in md
    assert "A fixed grid of the same resolution has 143 levels" in md
    html = render_search_html(report)
    assert html.count("<circle") == 2 and "Share of good runs against fault.delay_ms" in html


@pytest.mark.parametrize("name", ["search-latency.yaml", "search-truncate.yaml"])
def test_the_example_searches_validate(name: str) -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "experiment" / name
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0 and "a search over fault." in result.output, result.output
