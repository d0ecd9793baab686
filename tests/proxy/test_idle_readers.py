"""Readers of a running proxy see every exchange it has answered, though its bookkeeping waits for an
idle moment of the loop (proxy/idlework.py). The idle threshold is stretched to 0.4 s here, so a
reader that did not wait would find nothing: the control API's /exchanges, a /metrics scrape, a
flush of the JSONL logs, a call onto the loop (the pytest fixture's exchanges() waits as they do)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.proxy import idlework

TOKEN = "idle-readers-token"
CONFIG = f"""
version: 1
control: {{token: {TOKEN}}}
exporters:
  prometheus: {{listen: "127.0.0.1:0"}}
  jsonl: {{exchanges_path: ex.jsonl}}
"""
HELD_S = 0.4


@pytest.fixture
def proxy(brownout_proxy: Any, upstream: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(idlework, "IDLE_S", HELD_S)
    monkeypatch.setattr(idlework, "MAX_S", 3 * HELD_S)
    config = tmp_path / "chaos.yaml"
    config.write_text(CONFIG)
    return brownout_proxy(config, upstream=upstream)


@pytest.fixture
def client(proxy: Any) -> Iterator[httpx.Client]:
    """Kept open while the test reads: a closing connection is I/O, which would end the wait early."""
    with httpx.Client(proxy=proxy.url, trust_env=False, timeout=10) as client:
        yield client


def _answered(client: httpx.Client, upstream: Any) -> float:
    assert client.get(f"{upstream.url}/tools/weather?city=Oslo").status_code == 200
    return time.monotonic()


def _requests_total(text: str) -> float:
    lines = [ln for ln in text.splitlines() if ln.startswith("brownout_requests_total{")]
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)


def test_the_control_api_waits_for_answered_exchanges(proxy: Any, client: httpx.Client, upstream: Any) -> None:
    _answered(client, upstream)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    got = httpx.get(proxy.addon.control.url + "/exchanges", headers=headers, trust_env=False, timeout=10)
    assert [r["path"] for r in got.json()["exchanges"]] == ["/tools/weather?city=Oslo"]


def test_a_scrape_counts_answered_exchanges(proxy: Any, client: httpx.Client, upstream: Any) -> None:
    _answered(client, upstream)
    port = proxy.addon.pipeline.exporters.metrics_server.server_port
    assert _requests_total(httpx.get(f"http://127.0.0.1:{port}/metrics", trust_env=False).text) == 1


def test_a_flush_writes_answered_exchanges(proxy: Any, client: httpx.Client, upstream: Any, tmp_path: Path) -> None:
    _answered(client, upstream)
    assert proxy.addon.pipeline.exporters.flush_logs()
    assert len((tmp_path / "ex.jsonl").read_text().splitlines()) == 1


def test_a_call_onto_the_loop_completes_them_first(proxy: Any, client: httpx.Client, upstream: Any) -> None:
    answered = _answered(client, upstream)
    seen = proxy.call(lambda: len(proxy.addon.pipeline.exporters.recent_exchanges(None, None)))
    assert seen == 1 and time.monotonic() - answered < HELD_S  # completed on the hop, not by waiting


def test_without_a_reader_the_bookkeeping_waits_for_the_idle_moment(
    proxy: Any, client: httpx.Client, upstream: Any
) -> None:
    """The other tests can fail: right after the answer nothing is counted yet."""
    _answered(client, upstream)
    assert proxy.addon.pipeline.judging == 1
    assert proxy.addon.pipeline.wait_completed(5 * HELD_S)
    assert proxy.addon.pipeline.judging == 0
