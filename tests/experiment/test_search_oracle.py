"""The breaking-point search against simulated agents whose breaking point is known exactly.

An oracle answers each batch with seeded Bernoulli draws from a known success curve, so the search,
its sequential tests and its fit run exactly as they do through the proxy, thousands of runs a second:
(a) a step at 2 s (an agent whose client times out after 2 s, under latency), (b) 1 - p^3 (an agent
that retries twice under an error with probability p: the goal of 0.9 breaks at p = 0.1^(1/3) = 0.464),
(c) each for fewer than a third of the runs of a grid of the same resolution.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from brownout.proxy.experiment.search.algorithm import Level, Oracle, Search, SearchResult
from brownout.proxy.experiment.search.scale import Scale
from brownout.proxy.experiment.search.sequential import Sprt

RETRY_POINT = 0.1 ** (1 / 3)  # 1 - p^3 = 0.9


def oracle(success: Callable[[float], float], seed: int) -> Oracle:
    rng = random.Random(seed)
    return lambda level, n: [rng.random() < success(level.value) for _ in range(n)]


def step_search(seed: int) -> SearchResult:
    scale = Scale(250, 8000, "log", resolution=0.05)
    search = Search(scale, Sprt(0.9, 0.1), max_runs=300, batch=6)
    return search.run(oracle(lambda delay_ms: 1.0 if delay_ms < 2000 else 0.0, seed))


def retry_search(seed: int) -> SearchResult:
    search = Search(Scale(0, 1, "linear", resolution=0.05), Sprt(0.9, 0.05), max_runs=600, batch=4)
    return search.run(oracle(lambda p: 1 - p**3, seed))


def grid_runs(scale: Scale, sprt: Sprt) -> int:
    return scale.grid_levels * sprt.fixed_n


def test_a_step_at_2_s_is_found_within_10_percent_and_inside_the_interval() -> None:
    scale = Scale(250, 8000, "log", resolution=0.05)
    for seed in range(5):
        result = step_search(seed)
        assert result.outcome == "found" and result.fit is not None
        estimate = scale.at(result.fit.estimate)
        low, high = (scale.at(u) for u in result.fit.interval)
        assert abs(estimate - 2000) <= 200, estimate
        assert low <= 2000 <= high, (low, high)
        assert high / low < 1.06  # the resolution (5%), not the whole bracket
        grid = grid_runs(scale, Sprt(0.9, 0.1))
        print(f"step seed {seed}: {result.runs} runs, a grid needs {grid} ({result.runs / grid:.1%})")
        assert result.runs < grid / 3


def test_b_the_retry_agents_interval_contains_its_breaking_point_in_at_least_18_of_20_searches() -> None:
    scale, sprt = Scale(0, 1, "linear", resolution=0.05), Sprt(0.9, 0.05)
    grid = grid_runs(scale, sprt)
    hits, spent = 0, []
    for seed in range(20):
        result = retry_search(seed)
        assert result.outcome == "found" and result.fit is not None
        low, high = result.fit.interval
        hits += low <= RETRY_POINT <= high
        spent.append(result.runs)
        assert result.runs < grid / 3, (seed, result.runs, grid)  # (c), every search
    print(f"1 - p^3: {hits}/20 intervals contain p = {RETRY_POINT:.3f}; runs {min(spent)}..{max(spent)}, grid {grid}")
    assert hits >= 18


def test_the_same_seed_gives_the_same_levels_in_the_same_order_and_the_same_estimate() -> None:
    a, b, other = retry_search(3), retry_search(3), retry_search(4)
    assert [lv.value for lv in a.levels] == [lv.value for lv in b.levels]
    assert [lv.outcomes for lv in a.levels] == [lv.outcomes for lv in b.levels]
    assert a.fit is not None and b.fit is not None and a.fit == b.fit
    assert [lv.outcomes for lv in a.levels] != [lv.outcomes for lv in other.levels]


def test_a_level_far_from_the_breaking_point_is_decided_in_a_few_runs() -> None:
    result = step_search(0)
    by_value = {lv.value: lv for lv in result.levels}
    assert by_value[8000].runs == 6 and by_value[8000].decision == "fails"  # one batch: three failures decide
    assert by_value[250].runs == 18 and by_value[250].decision == "holds"  # log(19) / log(0.95 / 0.8) runs


def test_a_goal_that_holds_or_fails_across_the_range_stops_after_the_ends() -> None:
    scale, sprt = Scale(0, 1000, "linear"), Sprt(0.9, 0.1)
    holds = Search(scale, sprt, max_runs=200, batch=6).run(oracle(lambda _: 1.0, 0))
    assert holds.outcome == "holds_across_range" and [lv.value for lv in holds.levels] == [0, 1000]
    assert holds.fit is None
    fails = Search(scale, sprt, max_runs=200, batch=6).run(oracle(lambda _: 0.0, 0))
    assert fails.outcome == "fails_across_range" and [lv.value for lv in fails.levels] == [0]


def test_a_parameter_harsher_when_lower_is_searched_from_the_top() -> None:
    # A stream cut after N events: the agent survives cuts at 6 events or more.
    scale = Scale(0, 20, "linear", harsher="lower", integer=True, resolution=1)
    result = Search(scale, Sprt(0.9, 0.1), max_runs=300, batch=6).run(oracle(lambda n: float(n >= 6), 1))
    assert result.levels[0].value == 20 and result.levels[1].value == 0
    assert all(float(lv.value).is_integer() for lv in result.levels)
    assert result.outcome == "found" and result.fit is not None
    low, high = sorted(scale.at(u) for u in result.fit.interval)
    assert low <= 5.5 <= high and high - low <= 1.5


def test_the_budget_caps_the_runs_and_says_so() -> None:
    search = Search(Scale(0, 1, "linear", resolution=0.01), Sprt(0.9, 0.05), max_runs=60, batch=4)
    result = search.run(oracle(lambda p: 1 - p**3, 2))
    assert result.outcome == "budget" and result.runs == 60
    assert result.fit is not None  # both ends were decided: the runs so far still give an interval


def test_a_stopped_oracle_ends_the_search() -> None:
    calls: list[Level] = []

    def stop_after_two(level: Level, n: int) -> list[bool] | None:
        calls.append(level)
        return None if len(calls) > 2 else [True] * n

    result = Search(Scale(0, 1, "linear"), Sprt(0.9, 0.1), max_runs=100, batch=9).run(stop_after_two)
    assert result.outcome == "stopped" and result.runs == 18
