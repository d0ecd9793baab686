"""The benchmark page's figures are the committed run's, rendered by bench/publish.py, never typed by hand."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench import publish
from bench.fleetreport import NO_FLEET_RUN, render_fleet
from bench.llm import CASES, LLM_PATHS, REFERENCE_PATHS
from bench.realtimereport import NO_REALTIME_RUN, render_realtime

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_is_rendered_from_the_committed_run() -> None:
    data = json.loads(publish.PUBLISHED.read_text())
    page = publish.PAGE.read_text()
    assert publish.rendered(page, data) == page, "docs/benchmark.md is stale: run bench/publish.py"


def _check_provenance(data: dict[str, Any], command: str) -> None:
    machine = data["meta"]["machine"]
    for key in ("cpu_model", "cores", "memory_gib", "os", "python", "mitmproxy", "load_tool", "date"):
        assert machine.get(key), key
    assert data["meta"]["command"].startswith(command)
    assert machine["brownout_dirty"] is False, "published runs come from a committed tree"
    if (ROOT / ".git").exists():
        ancestor = subprocess.run(
            ["git", "merge-base", "--is-ancestor", machine["brownout_commit"], "HEAD"], cwd=ROOT, check=False
        )
        assert ancestor.returncode == 0, f"commit {machine['brownout_commit']} is not in this history"


def test_the_committed_run_names_its_machine_command_and_a_clean_commit_of_this_history() -> None:
    _check_provenance(json.loads(publish.PUBLISHED.read_text()), "bench/run.py")


def test_a_committed_fleet_run_is_on_the_page_with_its_provenance() -> None:
    fleet = publish.fleet_run()
    page = publish.PAGE.read_text()
    if fleet is None:  # none committed yet: the page says so
        assert f"{publish.FLEET_BEGIN}\n{NO_FLEET_RUN}\n{publish.FLEET_END}" in page
        return
    _check_provenance(fleet, "bench/fleet.py")
    assert render_fleet(fleet) in page


def test_the_committed_realtime_runs_are_on_the_page_with_their_provenance() -> None:
    runs = publish.realtime_runs()
    page = publish.PAGE.read_text()
    assert render_realtime([]) == NO_REALTIME_RUN
    assert len(runs) >= 2, "the realtime figures are published from runs one after the other"
    for run in runs:
        _check_provenance(run, "bench/realtime.py")
    assert f"{publish.REALTIME_BEGIN}\n{render_realtime(runs)}\n{publish.REALTIME_END}" in page
    # Every path of every run, and each target's value in each run, in run order.
    for name in runs[0]["targets"]:
        values = " / ".join(f"{run['targets'][name]['value']:g}" for run in runs)
        assert f"| {name} | {values}" in page.replace(",", ""), name
    for path in runs[0]["concurrent"]["results"]:
        assert f"| {path} | " in page


def test_rendering_shows_every_path_and_target_verdict() -> None:
    data = json.loads(publish.PUBLISHED.read_text())
    text = publish.render_results(data)
    llm = publish.render_llm(data)
    for path in data["results"]:
        assert f"| {path} |" in text
    for name, target in data["targets"].items():
        if target.get("kind") == "target":
            assert f"| {name} |" in (llm if target.get("group") == "llm" else text)


def test_the_llm_shaped_cases_are_published_with_their_targets() -> None:
    data = json.loads(publish.PUBLISHED.read_text())
    text = publish.render_llm(data)
    if "llm" not in data:  # a run from before bench/llm.py: the page says so
        assert text == publish.NO_LLM_RUN
        return
    assert set(data["llm"]["cases"]) == {case.name for case in CASES}
    for case, results in data["llm"]["cases"].items():
        # A run from before brownout-all-on-process existed has the paths it had then.
        assert set(results) in (set(LLM_PATHS), set(LLM_PATHS) - {"brownout-all-on-process"})
        for path in results:
            assert f"| {case} | {path} |" in text
        for measure in ("rps_ratio_vs_mitmdump_c1", "rps_ratio_vs_mitmdump_c8", "p99_added_vs_mitmdump_c1_ms"):
            name = f"brownout-all-on: {case}: {measure}"
            assert data["targets"][name]["group"] == "llm" and f"| {name} |" in text
        assert data["targets"][f"{case}: broken_answers_and_load_errors"]["met"], "a path broke the answers"


def test_the_reference_runs_split_every_case_with_their_provenance_on_the_page() -> None:
    runs = publish.reference_runs()
    assert len(runs) >= 2, "the page compares runs: keep at least two"
    page = publish.PAGE.read_text()
    assert publish.render_llm_reference(runs) in page
    for run in runs:
        _check_provenance(run, "bench/run.py --llm-only --llm-reference")
        assert set(run["llm"]["cases"]) == {case.name for case in CASES}
        for results in run["llm"]["cases"].values():
            assert set(results) == set(LLM_PATHS) | set(REFERENCE_PATHS)
            for name, result in results.items():  # each proxy's CPU was measured, the upstream's was not
                assert ("cpu_ms_per_request" in result["c8"]) == (name != "direct"), name


def test_the_reference_table_puts_the_runs_side_by_side() -> None:
    run = json.loads((publish.PUBLISHED.parent / "llm-reference-1.json").read_text())
    text = publish.render_llm_reference([run, run])
    mitmdump = run["llm"]["cases"]["openai-tools"]["mitmdump"]
    cpu = f"{mitmdump['c8']['cpu_ms_per_request']:.2f}"
    assert f"| openai-tools | mitmdump | {cpu} / {cpu} |" in text
    assert "| openai-tools | direct |" not in text  # the upstream is no proxy
    assert publish.render_llm_reference([]).startswith("No committed run")
