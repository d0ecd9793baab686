"""The realtime bench's instruments: its upstream and client deliver every stamped delta, brownout reads the
sessions they make as realtime sessions (so the bench measures the realtime path, not a pass-through), and
the verdicts follow the numbers. No timing is asserted: the case itself is `python bench/realtime.py`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.procs import Proc, start_module
from bench.realtime import LATE_MS, targets
from bench.wsclient import SessionOutcome, by_position, collect, summarise
from brownout.proxy.embed import ProxyHandle
from tests.proxy.realtime_clients import Recorder, wait_for


@pytest.fixture
def wsupstream(tmp_path: Path) -> Iterator[Proc]:
    proc = start_module("wsupstream", "bench.wsupstream", [], tmp_path)
    try:
        yield proc
    finally:
        proc.stop()


def _url(port: int, events: int = 5) -> str:
    return f"ws://127.0.0.1:{port}/v1/realtime?model=gpt-realtime&events={events}&interval_ms=10"


def test_every_stamped_delta_arrives_directly(wsupstream: Proc) -> None:
    outcomes, cpu = collect(_url(wsupstream.port), 4, 5, generations=2, ramp_s=0.1, start=(time.time() + 0.5, 0.01))
    s = summarise(outcomes, LATE_MS)
    assert (s["sessions"], s["sessions_complete"], s["events_expected"], s["events_delivered"]) == (4, 4, 40, 40)
    assert s["errors"] == {} and s["lateness"]["p50_ms"] is not None and len(cpu) == 1
    # Each delta knows its place in its generation: 0 to 4, twice (two generations of 5).
    assert all(o.positions == [0, 1, 2, 3, 4] * 2 for o in outcomes)


def test_brownout_reads_the_bench_sessions_as_realtime_sessions(
    wsupstream: Proc, brownout_proxy: Callable[..., ProxyHandle]
) -> None:
    proxy = brownout_proxy("seed: 1\n", mode=f"reverse:http://127.0.0.1:{wsupstream.port}")
    rec = Recorder(proxy)
    outcomes, _ = collect(_url(proxy.port), 2, 5, generations=2, ramp_s=0)
    assert summarise(outcomes, LATE_MS)["events_delivered"] == 20
    assert wait_for(lambda: len(rec.sessions()) == 2 and len(rec.generations()) == 4)
    gen = rec.generations()[0]
    assert gen.provider == "openai_realtime" and gen.model == "gpt-realtime" and gen.usage.output_tokens == 5
    assert gen.realtime is not None and gen.realtime.status == "completed"


def test_lateness_is_split_by_a_deltas_place_in_its_generation() -> None:
    # Two sessions of one generation of 8 deltas: late at the start and at the end, on time in between.
    late = [0.09, 0.05, 0.03, 0.004, 0.002, 0.003, 0.02, 0.12]
    outcomes = [SessionOutcome(8, 8, late, list(range(8))), SessionOutcome(8, 8, [x / 2 for x in late], list(range(8)))]
    edges = by_position(outcomes, 8)
    assert edges["first"]["max_ms"] == 90.0 and edges["middle"]["max_ms"] == 4.0 and edges["last"]["max_ms"] == 120.0
    # A generation too short for a middle: every delta is at an edge, none is lost.
    short = by_position([SessionOutcome(4, 4, [0.001, 0.002, 0.003, 0.004], [0, 1, 2, 3])], 4)
    assert short["middle"]["max_ms"] is None and short["first"]["max_ms"] == 3.0 and short["last"]["max_ms"] == 4.0


def test_a_refused_connection_is_an_outcome_not_a_crash() -> None:
    outcomes, _ = collect(_url(9), 1, 5, ramp_s=0)  # nothing listens on port 9
    s = summarise(outcomes, LATE_MS)
    assert s["sessions_complete"] == 0 and s["errors"] == {"ConnectionRefusedError": 1}


def _lateness(p50: float, p99: float, mx: float) -> dict[str, Any]:
    return {"p50_ms": p50, "p99_ms": p99, "max_ms": mx, "late_events": 0, "late_bound_ms": LATE_MS}


def test_the_verdicts_follow_the_numbers() -> None:
    delay = {
        "results": {
            "mitmdump": _lateness(1.0, 5.0, 6.0),
            "brownout-all-on": {**_lateness(1.2, 7.5, 9.0), "added_p99_ms_vs_mitmdump": 2.5},
            "brownout": {**_lateness(1.1, 6.0, 7.0), "added_p99_ms_vs_mitmdump": 1.0},
        }
    }
    session = {"sessions": 200, "sessions_complete": 200, "events_expected": 12000, "events_delivered": 12000}
    many = {
        "results": {
            "brownout-all-on": {
                **session,
                "lateness": _lateness(2.0, 40.0, 120.0),
                "proxy": {"peak_rss_mb": 140.0, "rss_start_mb": 120.0},
            },
            "brownout": {
                **session,
                "events_delivered": 11999,
                "lateness": _lateness(2.0, 30.0, 80.0),
                "proxy": {"peak_rss_mb": 600.0},
            },
        }
    }
    met = {name: t["met"] for name, t in targets(delay, many).items()}
    assert met == {
        "brownout-all-on: event_p99_added_vs_mitmdump_ms": False,
        "brownout: event_p99_added_vs_mitmdump_ms": True,
        "brownout-all-on: sessions_events_delivered": True,
        "brownout-all-on: sessions_complete": True,
        "brownout-all-on: sessions_max_lateness_ms": False,
        "brownout-all-on: sessions_peak_rss_mb": True,
        "brownout: sessions_events_delivered": False,
        "brownout: sessions_complete": True,
        "brownout: sessions_max_lateness_ms": True,
        "brownout: sessions_peak_rss_mb": False,
    }


def test_an_outcome_counts_its_own_expected_deltas() -> None:
    assert summarise([SessionOutcome(10, delivered=4, error="x")], LATE_MS)["events_expected"] == 10
