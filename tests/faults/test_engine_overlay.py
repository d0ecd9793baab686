"""The engine's overlay: an experiment phase's rules after the config's, fresh each time, kept across reloads."""

from __future__ import annotations

import pytest

from tests.faults.engine_support import T0, WIRE, Clock, config, engine, ex


def fired(e: object, i: int, session: str = "s1") -> list[str]:
    exchange = ex(i, session)
    e.plan(exchange, WIRE)  # type: ignore[attr-defined]
    return [f.rule for f in exchange.faults]


def test_overlay_rules_run_after_the_configs_and_go_away_whole() -> None:
    e = engine({"name": "own", "fault": {"type": "tag"}, "schedule": {"every": 2}})
    assert fired(e, 1) == []
    e.set_overlay(config({"name": "exp/chaos/cut", "fault": {"type": "tag"}}).rules, origin=T0)
    assert fired(e, 2) == ["own", "exp/chaos/cut"]
    assert [r["name"] for r in e.status()["rules"]] == ["own", "exp/chaos/cut"]
    assert e.active_rules() == {"own": True, "exp/chaos/cut": True}
    e.clear_overlay()
    assert fired(e, 3) == []  # the config's own counter went on: match 3 of every 2 does not fire
    assert fired(e, 4) == ["own"]
    assert [r.name for r in e.rules] == ["own"] and e.overlay == ()


def test_an_overlay_starts_with_fresh_counters_each_time_it_is_set() -> None:
    e = engine()
    capped = config({"name": "exp/p/cap", "fault": {"type": "tag"}, "schedule": {"max_injections": 1}}).rules
    e.set_overlay(capped, origin=T0, counters_tag="run-1.0")
    assert [fired(e, i) for i in range(2)] == [["exp/p/cap"], []]
    assert e.overlay[0].key.startswith("run-1.0/exp/p/cap#")
    e.set_overlay(capped, origin=T0, counters_tag="run-2.0")  # the same phase, run again: a fresh budget
    assert [fired(e, i) for i in range(2, 4)] == [["exp/p/cap"], []]


def test_the_kill_switch_and_toggles_cover_overlay_rules() -> None:
    e = engine()
    e.set_overlay(config({"name": "exp/p/r", "fault": {"type": "tag"}}).rules, origin=T0)
    e.pause()
    assert fired(e, 0) == [] and e.decisions.recent()[-1].outcome == "skipped_paused"
    e.resume()
    e.set_rule_enabled("exp/p/r", False)
    assert fired(e, 1) == []


def test_a_reload_keeps_the_overlay_unless_the_config_takes_one_of_its_names() -> None:
    e = engine({"name": "own", "fault": {"type": "tag"}})
    e.set_overlay(config({"name": "exp/p/r", "fault": {"type": "tag"}}).rules, origin=T0)
    e.reload(config({"name": "own2", "fault": {"type": "tag"}}))
    assert [r.name for r in e.rules] == ["own2", "exp/p/r"]
    e.reload(config({"name": "exp/p/r", "fault": {"type": "tag"}}))
    assert [r.name for r in e.rules] == ["exp/p/r"] and e.overlay == ()


def test_overlay_names_may_not_clash_with_the_configs() -> None:
    e = engine({"name": "own", "fault": {"type": "tag"}})
    with pytest.raises(ValueError, match="clash with the config's rules: own"):
        e.set_overlay(config({"name": "own", "fault": {"type": "tag"}}).rules, origin=T0)
    assert [r.name for r in e.rules] == ["own"]


def test_overlay_windows_count_from_the_phase_not_from_the_fleet() -> None:
    clock = Clock()
    e = engine(clock=clock)
    windowed = config({"name": "exp/p/late", "fault": {"type": "tag"}, "schedule": {"start_s": 10}}).rules
    e.set_overlay(windowed, origin=T0 + 100)  # the phase started 100 s after the engine
    clock.t = T0 + 105
    assert fired(e, 0) == []
    clock.t = T0 + 111
    assert fired(e, 1) == ["exp/p/late"]
    e.set_origin(T0 + 200)  # the fleet's origin arrives: the phase's windows stay where they were
    assert fired(e, 2) == ["exp/p/late"]
