"""bench/fleet.py: both cases run through real servers (brownout, redis-server, --workers 2), and are judged.

No timing is asserted: the measurement is `python bench/fleet.py` on a quiet machine
(docs/benchmark.md). The run here is a fraction of a second per path, to show the cases work.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from bench.fleet import CONNECTIONS, RULE_SETS, STATE_PATHS, run_fleet_bench, state_config
from bench.fleetload import LOAD, Run, median_runs, session_script
from bench.fleetreport import NO_FLEET_RUN, P50_ADDED_MS, render_fleet, targets
from bench.load import LoadResult, have_wrk
from bench.procstat import children, cpu_seconds, descendants, tree_cpu_seconds
from bench.publish import FLEET_BEGIN, FLEET_END, PAGE, PUBLISHED, rendered
from bench.report import missed


def _path(p50: float, rps: float = 100.0, p99: float = 5.0) -> dict[str, Any]:
    run = {"rps": rps, "p50_ms": p50, "p99_ms": p99, "cpu_s_per_1k": {"brownout": 1.0, LOAD: 0.1}}
    run["rounds"] = {"rps": [rps], "p50_ms": [p50], "p99_ms": [p99]}
    return {"c1": run, "c8": run}


def _data(memory_p50: float, redis_p50: float) -> dict[str, Any]:
    return {"state": {"memory": _path(memory_p50), "redis": _path(redis_p50, rps=80.0, p99=7.0)}}


@pytest.mark.parametrize(("added", "met"), [(0.5, True), (0.51, False), (-0.1, True)])
def test_what_redis_adds_to_the_median_at_one_connection_is_the_target(added: float, met: bool) -> None:
    t = targets(_data(2.0, 2.0 + added))
    assert t["redis: p50_added_vs_memory_c1_ms"]["met"] is met
    assert t["redis: p50_added_vs_memory_c1_ms"]["target"] == f"<= {P50_ADDED_MS:g} ms"
    # at 8 connections the proxy is saturated: queueing, reported without a verdict
    assert t["redis: p50_added_vs_memory_c8_ms"]["value"] == pytest.approx(added)
    assert t["redis: p50_added_vs_memory_c8_ms"]["met"] is None
    for c in ("c1", "c8"):
        assert t[f"redis: p99_added_vs_memory_{c}_ms"]["value"] == 2.0  # informational
        assert t[f"redis: rps_ratio_vs_memory_{c}"]["value"] == 0.8
    assert bool(missed(t)) is not met


def test_what_redis_adds_is_paired_round_by_round() -> None:
    """A round on a busy machine slows both paths of that round: the differences tell, the medians would not."""
    data = _data(2.0, 2.0)
    data["state"]["memory"]["c1"] = {**data["state"]["memory"]["c1"], "rounds": {"p50_ms": [2.0, 9.0, 2.0]}}
    data["state"]["redis"]["c1"] = {**data["state"]["redis"]["c1"], "rounds": {"p50_ms": [2.3, 9.4, 5.0]}}
    t = targets(data)["redis: p50_added_vs_memory_c1_ms"]
    assert (t["value"], t["met"]) == (0.4, True)
    assert t["detail"] == "per round [0.3, 0.4, 3.0] ms"


def test_a_path_that_did_not_run_is_not_measured_and_misses() -> None:
    data = _data(2.0, 2.0)
    del data["state"]["redis"]
    t = targets(data)
    assert t["redis: p50_added_vs_memory_c1_ms"]["value"] is None
    assert "redis: p50_added_vs_memory_c1_ms" in " ".join(missed(t))


def test_medians_and_the_spread_of_the_rounds() -> None:
    def run(rps: float, p50: float, cpu: float | None) -> Run:
        return Run(LoadResult("wrk", 8, 1.0, 1000, 0, rps, p50, p50 * 3), {"brownout": cpu, LOAD: 0.05})

    m = median_runs([run(100, 2.0, 1.5), run(300, 1.0, None), run(200, 9.0, 2.5)])
    assert (m["rps"], m["p50_ms"], m["requests"]) == (200, 2.0, 3000)
    assert m["cpu_s_per_1k"] == {"brownout": 2.0, LOAD: 0.05}  # per 1,000 requests; unknown rounds left out
    assert m["rounds"]["rps"] == [100, 300, 200]


def test_the_wrk_script_names_one_of_n_sessions_per_request() -> None:
    script = session_script(16)
    assert 'wrk.format(nil, nil, {["x-brownout-session"] = "bench-" .. (n % 16)})' in script


def test_a_supervisors_workers_are_its_children() -> None:
    code = "import subprocess, sys, time; [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])"
    code += " for _ in range(2)]; time.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while len(children(parent.pid)) < 2:
            assert time.monotonic() < deadline, "no children seen"
            time.sleep(0.05)
    finally:
        for pid in children(parent.pid):
            subprocess.run(["kill", str(pid)], check=False)
        parent.kill()
        parent.wait(5)


def test_a_process_trees_cpu_counts_its_busy_child() -> None:
    """bench/llm.py's proxy CPU per request includes brownout's analysis process."""
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'while True: pass']); time.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while not children(parent.pid):
            assert time.monotonic() < deadline, "no child seen"
            time.sleep(0.05)
        time.sleep(1.0)
        own, tree = cpu_seconds(parent.pid), tree_cpu_seconds(parent.pid)
        assert own is not None and tree is not None and tree - own > 0.5  # the child spun for about a second
        assert descendants(parent.pid) == children(parent.pid)
    finally:
        for pid in children(parent.pid):
            subprocess.run(["kill", str(pid)], check=False)
        parent.kill()
        parent.wait(5)


def test_the_configs_differ_only_in_the_state_backend() -> None:
    for rules in RULE_SETS:
        memory, redis = (
            state_config("memory", "redis://x:1/0", rules=rules),
            state_config("redis", "redis://x:1/0", rules=rules),
        )
        assert "state:" not in memory and 'state: {backend: redis, url: "redis://x:1/0"}' in redis
        assert memory.replace("\n", "") in redis.replace('state: {backend: redis, url: "redis://x:1/0"}', "").replace(
            "\n", ""
        )
    assert "rules:" not in state_config("redis", "redis://x:1/0", rules=None)


def test_the_target_pair_decides_in_flight_and_the_other_pair_first() -> None:
    """The rule sets are what their paths say: the target pair's faults act only on the answer (a fleet decides
    them while the request travels), the other pair's may act before the request goes."""
    from brownout.faults.engine import FaultEngine
    from brownout.proxy.configload import parse_config

    for name, (_, rules) in STATE_PATHS.items():
        engine = FaultEngine(parse_config(state_config("memory", "", rules=rules)).ruleset)
        assert [r.name for r in engine.rules if r.counted][:2] == ["every-1000", "capped"]
        assert {r.in_flight for r in engine.rules} == {rules == "answer"}, name
        assert any(r.name == "quota" for r in engine.rules) is (rules == "first")


def test_the_docs_block_says_there_is_no_run_until_one_is_committed() -> None:
    assert render_fleet(None) == NO_FLEET_RUN
    data = _data(2.0, 2.2)
    data["meta"] = {
        "command": "bench/fleet.py",
        "rounds": 3,
        "duration_s": 4.0,
        "machine": {"date": "d", "brownout_commit": "c" * 40, "cpu_model": "cpu", "cores": 2, "os": "os"}
        | {"python": "3.13", "load_tool": "wrk"},
    }
    data["targets"] = targets(data)
    text = render_fleet(data)
    for path in ("memory", "redis"):
        assert f"| {path} |" in text
    for name in data["targets"]:
        assert f"| {name} |" in text
    assert "| redis: p50_added_vs_memory_c1_ms | 0.2ms | <= 0.5 ms | met |" in text
    page = rendered(PAGE.read_text(), json.loads(PUBLISHED.read_text()), fleet=data)
    assert f"{FLEET_BEGIN}\n{text}\n{FLEET_END}" in page


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_both_cases_run_through_real_servers() -> None:
    data = run_fleet_bench(duration_s=0.5, rounds=1, use_wrk=have_wrk())
    for case, paths in (("state", tuple(STATE_PATHS)), ("workers", ("workers-1", "workers-2"))):
        assert list(data[case]) == list(paths)
        for path in paths:
            for c in CONNECTIONS:
                run = data[case][path][f"c{c}"]
                assert run["requests"] > 0 and run["errors"] == 0, (case, path, c, run)
    cpu = data["workers"]["workers-2"]["c8"]["cpu_s_per_1k"]
    assert {"supervisor", "worker 0", "worker 1", "upstream", "redis-server", LOAD} <= set(cpu)
    assert cpu["worker 0"] and cpu["worker 1"]  # both workers served
    assert data["state"]["redis"]["c8"]["cpu_s_per_1k"]["redis-server"]  # the redis path used Redis
    assert all(t["value"] is not None for t in targets(data).values())
