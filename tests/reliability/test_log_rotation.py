"""The JSONL logs of a running proxy survive logrotate's `mv`, deletion of the file and of its directory,
and a path that cannot be written: new lines go to the configured path, or are counted and logged once.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.proxy.test_passthrough import collect, wait_for

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def ids(path: Path) -> list[str]:
    return [json.loads(x)["id"] for x in path.read_text().splitlines()]


@pytest.mark.timeout(60)
def test_logs_follow_rotation_deletion_and_a_lost_directory(
    tmp_path: Path, upstream: Any, brownout_proxy: Any, caplog: Any
) -> None:
    logs = tmp_path / "logs"
    log = logs / "exchanges.jsonl"
    seen, on_exchange = collect()
    config = f"version: 1\nexporters:\n  jsonl: {{exchanges_path: {log}}}\n"
    proxy = brownout_proxy(config, mode="reverse", upstream=upstream, on_exchange=on_exchange)
    hub = proxy.addon.pipeline.exporters

    def send(n: int) -> list[str]:
        """n requests; the ids of their exchanges once the log writer has taken them."""
        before = len(seen)
        with httpx.Client(base_url=proxy.url, trust_env=False) as client:
            for _ in range(n):
                assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
        wait_for(seen, before + n)
        assert hub.flush_logs()
        return [ex.id for ex in seen[before:]]

    first = send(3)
    assert ids(log) == first
    log.rename(logs / "exchanges.jsonl.1")  # logrotate without copytruncate, and no signal to brownout
    after_mv = send(2)
    assert ids(logs / "exchanges.jsonl.1") == first
    assert ids(log) == after_mv

    log.unlink()
    after_rm = send(2)
    assert ids(log) == after_rm

    shutil.rmtree(logs)
    after_rmdir = send(2)
    assert ids(log) == after_rmdir

    # The directory's place taken by a file: nothing can be written; every line is counted, traffic goes on.
    shutil.rmtree(logs)
    logs.write_text("")
    with caplog.at_level(logging.ERROR):
        send(3)
    dropped = hub.metrics.registry.get_sample_value("brownout_export_dropped_total", {"exporter": "jsonl"})
    assert dropped == 3
    lost = [r for r in caplog.records if "lost data" in r.getMessage()]
    assert len(lost) == 1 and str(log) in lost[0].getMessage()
    assert proxy.addon.guard.snapshot() == {}  # the world's failure, not brownout's

    logs.unlink()  # the disk comes back
    back = send(1)
    assert ids(log) == back
