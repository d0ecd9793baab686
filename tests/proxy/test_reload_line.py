"""A successful hot reload says in one log line which rules it added, removed and changed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.configdiff import describe_reload
from brownout.proxy.configload import parse_config

BEFORE = """
version: 1
rules:
  - {name: keep, fault: {type: latency, delay_ms: 10}}
  - {name: tune, fault: {type: latency, delay_ms: 10}}
  - {name: drop, fault: {type: latency, delay_ms: 10}}
"""
AFTER = """
version: 1
rules:
  - {name: keep, fault: {type: latency, delay_ms: 10}}
  - {name: tune, fault: {type: latency, delay_ms: 20}}
  - {name: new-one, fault: {type: http_error, status: 503}}
"""


def test_the_line_names_rules_added_removed_and_changed() -> None:
    old, new = parse_config(BEFORE), parse_config(AFTER)
    assert describe_reload(old, new) == "rules added: new-one; removed: drop; changed: tune"
    assert describe_reload(old, old) == "rules unchanged"
    seeded = parse_config(BEFORE + "seed: 7\ninvariants: [{type: stream_complete}]\n")
    assert describe_reload(old, seeded) == "rules unchanged; also changed: seed, invariants"


def test_a_hot_reload_logs_its_changes_once(
    tmp_path: Path, brownout_proxy: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text(BEFORE)
    proxy = brownout_proxy(path)
    with caplog.at_level(logging.WARNING, logger="brownout.proxy.lifecycle"):
        path.write_text(AFTER)
        deadline = time.monotonic() + 10
        while [r.name for r in proxy.addon.config.rules] != ["keep", "tune", "new-one"] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the line is logged right after the switch
    lines = [r.getMessage() for r in caplog.records if "config reloaded" in r.getMessage()]
    assert lines == [f"brownout: config reloaded from {path}: rules added: new-one; removed: drop; changed: tune"]
