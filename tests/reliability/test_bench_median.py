"""bench/load.py's median_round: throughput from the median round, each latency percentile from all rounds."""

from __future__ import annotations

from typing import Any

from bench.load import ROUNDS_LATENCY, LoadResult, median_round
from bench.publish import _machine


def _round(rps: float, p50: float, p99: float) -> LoadResult:
    return LoadResult("wrk", 1, 4.0, int(rps * 4), 0, rps, p50, p99)


def test_a_stalled_round_with_the_median_throughput_does_not_decide_the_tail() -> None:
    # Round 3 has the median req/s, but a host stall held many of its requests: its own p99 is 21 ms.
    runs = [
        _round(480, 2.0, 4.1),
        _round(520, 1.8, 3.9),
        _round(500, 2.2, 21.0),
        _round(470, 2.1, 4.4),
        _round(530, 1.9, 4.0),
    ]
    got = median_round(runs)
    assert got["rps"] == 500 and got["requests"] == 2000  # the median round's own figures
    assert got["p99_ms"] == 4.1 and got["p50_ms"] == 2.0
    assert got["p99_ms_rounds"] == [4.1, 3.9, 21.0, 4.4, 4.0]
    assert got["rps_rounds"] == [480, 520, 500, 470, 530]


def _meta(**extra: Any) -> dict[str, Any]:
    machine = {"date": "d", "brownout_commit": "c" * 40, "cpu_model": "cpu", "cores": 2, "memory_gib": 1,
               "os": "os", "python": "3", "mitmproxy": "12", "load_tool": "wrk"}  # fmt: skip
    return {"meta": {"command": "bench/run.py", "rounds": 5, "duration_s": 4, "machine": machine, **extra}}


def test_the_published_header_says_how_the_run_summarised_its_rounds() -> None:
    assert _machine(_meta(summary=ROUNDS_LATENCY)).endswith(
        "the median round; p50 and p99 are each the median over the rounds."
    )
    assert _machine(_meta()).endswith("per path, the median round.")  # a run from before says what it did
