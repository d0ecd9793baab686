"""Promise 6, load and soak, scaled down for CI: ~25 s of mixed traffic through a `brownout run`
subprocess (OpenAI and Anthropic, JSON and SSE, ~20% faulted); the same verdict as bench/soak.py.

The 10-minute run is `python bench/soak.py --duration 600 --rate N`; docs/reliability.md describes its verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import run_soak
from bench.soakmon import Limits


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
