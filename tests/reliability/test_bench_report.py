"""bench/report.py's verdicts: each target met just inside its bound and missed just outside it."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from bench.report import load_targets, missed, print_report, streams_targets
from bench.run import build_parser


def _path(rps1: float, rps8: float, p99: float = 1.0, ttft: float = 1.0) -> dict[str, Any]:
    load = {"p50_ms": 0.5, "errors": 0}
    return {
        "c1": {**load, "rps": rps1, "p99_ms": p99},
        "c8": {**load, "rps": rps8, "p99_ms": p99},
        "sse": {"ttft_keepalive_ms": ttft, "ttft_ms": ttft + 1, "total_ms": 900.0, "gaps_ms": [100.0]},
    }


def _results(**brownouts: dict[str, Any]) -> dict[str, Any]:
    base = {
        "direct": _path(8000, 9000, p99=0.2, ttft=0.5),
        "mitmdump": _path(1000, 1200, p99=3.0, ttft=900.0),
        "mitmdump-stream": _path(1000, 1200, p99=3.0, ttft=0.9),
    }
    return {**base, **brownouts}


@pytest.mark.parametrize(
    ("name", "rps1", "rps8", "met1", "met8"),
    [
        ("brownout-all-on", 900, 1080, True, True),  # exactly 0.90x at both
        ("brownout-all-on", 899, 1200, False, True),
        ("brownout-all-on", 1000, 1079, True, False),
        ("brownout", 1000, 1200, True, True),  # exactly 1.0x
        ("brownout", 999, 1300, False, True),
        ("brownout", 1100, 1199, True, False),
    ],
)
def test_throughput_floor_against_plain_mitmdump(name: str, rps1: float, rps8: float, met1: bool, met8: bool) -> None:
    others = {} if name == "brownout" else {"brownout": _path(1000, 1200)}
    targets = load_targets(_results(**others, **{name: _path(rps1, rps8)}))
    assert targets[f"{name}: rps_ratio_vs_mitmdump_c1"]["met"] is met1
    assert targets[f"{name}: rps_ratio_vs_mitmdump_c8"]["met"] is met8
    assert targets[f"{name}: rps_ratio_vs_mitmdump_c1"]["value"] == pytest.approx(rps1 / 1000, abs=1e-3)
    assert f"{rps1:,.0f} vs 1,000 req/s" in targets[f"{name}: rps_ratio_vs_mitmdump_c1"]["detail"]


@pytest.mark.parametrize("name", ["brownout", "brownout-all-on"])
@pytest.mark.parametrize(("p99", "met"), [(5.0, True), (5.01, False), (2.0, True)])
def test_p99_at_one_connection_within_2ms_of_mitmdump(name: str, p99: float, met: bool) -> None:
    targets = load_targets(_results(**{"brownout": _path(1000, 1200), name: _path(1000, 1200, p99=p99)}))
    row = targets[f"{name}: p99_added_vs_mitmdump_c1_ms"]
    assert row["met"] is met
    assert row["value"] == pytest.approx(p99 - 3.0)


@pytest.mark.parametrize("name", ["brownout", "brownout-all-on"])
@pytest.mark.parametrize(("ttft", "met"), [(2.5, True), (2.51, False)])
def test_ttft_within_2ms_of_direct_on_a_kept_alive_connection(name: str, ttft: float, met: bool) -> None:
    targets = load_targets(_results(**{"brownout": _path(1000, 1200), name: _path(1000, 1200, ttft=ttft)}))
    assert targets[f"{name}: ttft_added_vs_direct_ms"]["met"] is met


def test_informational_rows_are_kept_and_never_missed() -> None:
    targets = load_targets(_results(brownout=_path(10, 10, p99=99, ttft=99)))
    info = {k for k, t in targets.items() if t["kind"] == "info"}
    assert {
        "brownout: p50_added_vs_mitmdump_c1_ms",
        "brownout: ttft_added_vs_direct_fresh_conn_ms",
        "brownout: ttft_added_vs_streaming_mitmdump_ms",
        "mitmdump: ttft_added_vs_direct_ms",
    } <= info
    assert not any(line.startswith(tuple(info)) for line in missed(targets))
    assert len(missed(targets)) == 4  # c1, c8, p99, ttft


def test_a_missing_brownout_is_a_miss_and_a_skipped_all_on_is_absent() -> None:
    targets = load_targets(_results())
    assert not any(k.startswith("brownout-all-on") for k in targets)
    lines = missed(targets)
    assert "brownout: rps_ratio_vs_mitmdump_c1: not measured (target >= 1x)" in lines
    assert len(lines) == 4


def test_all_met_means_nothing_missed() -> None:
    targets = load_targets(_results(brownout=_path(1100, 1300), **{"brownout-all-on": _path(950, 1100)}))
    assert missed(targets) == []
    assert all(t["met"] for t in targets.values() if t["kind"] == "target")


def _streams_case(delivered: int = 60_000, complete: int = 1000, max_ms: float = 120.0, rss: float = 300.0) -> dict:
    def path(proxy: dict[str, Any] | None, lateness_max: float) -> dict[str, Any]:
        return {
            "streams": 1000,
            "streams_complete": complete,
            "events_expected": 60_000,
            "events_delivered": delivered,
            "errors": {},
            "lateness": {"p50_ms": 1.0, "p99_ms": 9.0, "max_ms": lateness_max, "late_events": 0},
            "proxy": proxy,
            "client_cpu_s": [1.0, 1.0],
            "upstream_cpu_s": 2.0,
        }

    return {
        "config": {"streams": 1000, "events": 60, "interval_ms": 100, "client_processes": 2},
        "results": {
            "direct": path(None, 3.0),
            "mitmdump": path({"peak_rss_mb": 90.0, "cpu_s": 3.0}, 5900.0),
            "brownout-all-on": path({"peak_rss_mb": rss, "cpu_s": 5.0}, max_ms),
        },
    }


@pytest.mark.parametrize(
    ("case", "failing"),
    [
        (_streams_case(), set()),
        (_streams_case(max_ms=250.0, rss=499.9), set()),
        (_streams_case(max_ms=250.01), {"streams_max_lateness_ms"}),
        (_streams_case(rss=500.0), {"streams_peak_rss_mb"}),
        (_streams_case(delivered=59_999), {"streams_events_delivered"}),
        (_streams_case(complete=999), {"streams_complete"}),
    ],
)
def test_streams_targets(case: dict[str, Any], failing: set[str]) -> None:
    targets = streams_targets(case)
    missed_names = {line.split(": ")[1] for line in missed(targets)}
    assert missed_names == failing
    assert targets["direct: streams_max_lateness_ms"]["kind"] == "info"
    assert targets["mitmdump: streams_p50_lateness_ms"]["value"] == 1.0


def test_streams_without_a_brownout_path_is_not_measured() -> None:
    case = _streams_case()
    del case["results"]["brownout-all-on"]
    assert missed(streams_targets(case)) == ["brownout: streams_complete: not measured (target >= 1000)"]


def test_report_prints_values_targets_and_verdicts() -> None:
    results = _results(brownout=_path(1100, 1300), **{"brownout-all-on": _path(850, 1100)})
    targets = {**load_targets(results), **streams_targets(_streams_case(max_ms=400.0))}
    data = {"results": results, "streams": _streams_case(max_ms=400.0), "targets": targets, "notes": ["a [note]"]}
    data["meta"] = {"duration_s": 4, "machine": {"load_tool": "wrk 4.1.0 [epoll]", "cores": 2, "cpu_model": "X"}}
    out = io.StringIO()
    print_report(data, Console(file=out, width=250))
    text = out.getvalue()
    assert "wrk 4.1.0 [epoll]" in text and "a [note]" in text  # no markup swallowed
    row = next(line for line in text.splitlines() if "brownout-all-on: rps_ratio_vs_mitmdump_c1" in line)
    assert "0.85x" in row and ">= 0.9x" in row and "missed" in row
    row = next(line for line in text.splitlines() if "streams_max_lateness_ms" in line and "all-on" in line)
    assert "400 ms" in row and "<= 250 ms" in row and "missed" in row


def test_check_and_its_strict_alias() -> None:
    assert build_parser().parse_args(["--check"]).check is True
    assert build_parser().parse_args(["--strict"]).check is True
    assert build_parser().parse_args([]).check is False
    assert build_parser().parse_args(["--streams-case"]).streams_case is True
