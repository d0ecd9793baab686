"""Promise 6, load and soak, scaled down for CI: ~25 s of mixed traffic through a `brownout run`
subprocess (OpenAI and Anthropic, JSON and SSE, ~20% faulted); the same verdict as bench/soak.py.

The 10-minute run is `python bench/soak.py --duration 600 --rate N`; docs/reliability.md describes its verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import run_soak
from bench.soakmon import Limits, Sample, Tally, judge
from tests.reliability.leaky_plugin import LINGER_S


@pytest.mark.slow
def test_short_soak_has_no_unexpected_errors_and_no_growth(tmp_path: Path) -> None:
    # A modest rate: CI machines are shared; the promise is about leaks, not throughput.
    limits = Limits(rss_growth_mb=15.0, warmup_s=8.0)
    verdict, samples = run_soak(22.0, 120.0, interval_s=2.0, limits=limits, workdir=tmp_path, concurrency=16)
    assert verdict.ok, (verdict.failures, verdict.figures)
    figures = verdict.figures
    assert figures["requests"] > 1000
    assert 0.1 < figures["fault_share"] < 0.3  # the 20% fault mix really fired
    assert figures["unexpected_errors"] == 0
    idle = [s for s in samples if s.idle]
    assert idle[-1].tasks is not None and idle[-1].tasks <= idle[0].tasks + 2
    assert (tmp_path / "decisions.jsonl").read_bytes().count(b"\n") >= figures["faulted"]  # every fault logged


# --- telling a leak from a descriptor still closing --------------------------------------------


def _samples(load_fds: list[int], idle: tuple[int, int]) -> list[Sample]:
    def sample(t: float, fds: int, is_idle: bool) -> Sample:
        return Sample(t, 100.0, fds, 10, 0, 0, 0, idle=is_idle)

    load = [sample(float(i + 1), fds, False) for i, fds in enumerate(load_fds)]
    return [sample(0.0, idle[0], True), *load, sample(float(len(load_fds) + 1), idle[1], True)]


@pytest.mark.parametrize(
    ("load_fds", "idle", "fails"),
    [
        # Keep-alive connections opened one by one under load, each with its upstream one: 2 fds apiece.
        ([20, 21, 20, 40, 51, 52, 52], (11, 11), False),
        ([20, 20, 20, 20, 62, 62], (11, 11), False),  # 16 connections x 2 + 10: the most allowed
        ([20, 20, 20, 20, 63, 63], (11, 11), True),
        ([20, 40, 60, 80, 100, 120], (11, 11), True),  # a leak per request grows past it
        # Idle counts are settled (a connection closing late is gone), so what stays is a leak.
        ([20, 20, 20, 20, 20, 20], (11, 13), False),
        ([20, 20, 20, 20, 20, 20], (11, 14), True),
    ],
)
def test_the_fd_verdict_allows_connections_in_flight_and_no_more(load_fds, idle, fails) -> None:
    limits = Limits(warmup_s=0.0)
    verdict = judge(_samples(load_fds, idle), Tally(sent=100, ok=100), limits, 10.0, concurrency=16)
    assert any("open fds grew" in f for f in verdict.failures) is fails, verdict.failures


@pytest.mark.slow
@pytest.mark.parametrize(("plugin", "leaks"), [("leaking_plugin", True), ("lingering_plugin", False)])
def test_a_real_leak_fails_the_soak_and_descriptors_closing_late_do_not(
    tmp_path: Path, plugin: str, leaks: bool
) -> None:
    # A brownout exporter (a test plugin) opens a socket per exchange: it keeps them (a leak), or closes
    # each LINGER_S later, after the run has stopped its traffic and waited SETTLE_S.
    limits = Limits(rss_growth_mb=1000.0, warmup_s=6.0)
    verdict, samples = run_soak(
        12.0,
        20.0,
        interval_s=1.0,
        limits=limits,
        workdir=tmp_path,
        concurrency=8,
        plugins=[f"tests.reliability.leaky_plugin:{plugin}"],
    )
    fd_failures = [f for f in verdict.failures if "open fds grew" in f]
    assert verdict.figures["unexpected_errors"] == 0 and verdict.figures["requests"] > 150
    if leaks:
        assert fd_failures, (verdict.figures["fds"], samples)
        assert samples[-1].fds - samples[0].fds > 150  # one per request, still open
    else:
        assert not fd_failures, (fd_failures, verdict.figures["fds"])
        assert LINGER_S > 2.0  # longer than the run waits before its idle count: only settling tells
