"""The options a worker of `brownout run --workers` starts with: its own JSONL files (`brownout_worker`)
and the fleet's kill switch from before its first request (`brownout_paused`), on a real proxy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.workers.paths import with_worker_paths, worker_log_path

FIRST_500 = """
version: 1
rules:
  - {name: first, match: {path: /tools/weather}, fault: {type: http_error, status: 500}, schedule: {first: 1}}
"""


@pytest.mark.parametrize(
    ("path", "index", "expected"),
    [
        ("logs/violations.jsonl", 0, "logs/violations.w0.jsonl"),
        ("/var/log/brownout/decisions.log.jsonl", 3, "/var/log/brownout/decisions.log.w3.jsonl"),
        ("exchanges", 1, "exchanges.w1"),
    ],
)
def test_a_workers_log_path_has_its_number_before_the_suffix(path: str, index: int, expected: str) -> None:
    assert worker_log_path(path, index) == expected


def test_only_the_logs_that_are_on_move() -> None:
    config = BrownoutConfig(exporters={"jsonl": {"path": "/l/v.jsonl"}})
    assert with_worker_paths(config, "") is config  # not a worker: untouched
    jsonl = with_worker_paths(config, "2").exporters.jsonl
    assert (jsonl.path, jsonl.decisions_path, jsonl.exchanges_path) == ("/l/v.w2.jsonl", None, None)


def test_a_worker_writes_its_own_files_and_keeps_them_across_a_reload(
    brownout_proxy: Callable[..., Any], tmp_path: Path, upstream: Any
) -> None:
    config = tmp_path / "chaos.yaml"
    config.write_text("version: 1\nexporters: {jsonl: {exchanges_path: ex.jsonl}}\n")
    proxy = brownout_proxy(config, extra_options={"brownout_worker": "1"}, upstream=upstream)
    assert proxy.addon.config.exporters.jsonl.exchanges_path == str(tmp_path / "ex.w1.jsonl")
    with httpx.Client(proxy=proxy.url, trust_env=False) as client:
        assert client.get(f"{upstream.url}/tools/weather?city=Oslo").status_code == 200
    assert proxy.addon.pipeline.exporters.flush_logs()
    assert len((tmp_path / "ex.w1.jsonl").read_text().splitlines()) == 1 and not (tmp_path / "ex.jsonl").exists()
    ok, _ = proxy.addon.reload()
    assert ok and proxy.addon.config.exporters.jsonl.exchanges_path == str(tmp_path / "ex.w1.jsonl")


@pytest.mark.parametrize(("paused", "status"), [(True, 200), (False, 500)])
def test_a_proxy_started_paused_injects_nothing_from_its_first_request(
    brownout_proxy: Callable[..., Any], upstream: Any, paused: bool, status: int
) -> None:
    proxy = brownout_proxy(FIRST_500, extra_options={"brownout_paused": paused}, upstream=upstream)
    assert proxy.addon.engine.paused is paused
    with httpx.Client(proxy=proxy.url, trust_env=False) as client:
        assert client.get(f"{upstream.url}/tools/weather?city=Oslo").status_code == status
