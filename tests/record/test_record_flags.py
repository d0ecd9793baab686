"""`brownout exec --record/--replay` end to end, and an embedded proxy flushing its cassettes when it stops."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from brownout.proxy.embed import running_proxy
from brownout.proxy.record.cassette import read_dir
from tests.record.support import mock_upstream

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
CLIENT = "import httpx, sys; print(httpx.get(sys.argv[1] + '/tools/weather?city=Lima', timeout=10).text)"


def brownout_exec(confdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    cmd = [str(Path(sys.executable).parent / "brownout"), "exec", "--confdir", str(confdir), "--session", "lima"]
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_exec_records_then_replays_without_the_upstream(tmp_path: Path, confdir: Path) -> None:
    tape = tmp_path / "tape"
    with mock_upstream() as up:
        live = brownout_exec(confdir, "--record", str(tape), "--", sys.executable, "-c", CLIENT, up.url)
        url = up.url
    assert live.returncode == 0, live.stderr
    [cassette] = read_dir(tape)
    assert cassette.session == "lima" and len(cassette.exchanges) == 1
    replayed = brownout_exec(confdir, "--replay", str(tape), "--", sys.executable, "-c", CLIENT, url)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == live.stdout and "Lima" in live.stdout


def test_stopping_the_proxy_flushes_every_recorded_exchange(tmp_path: Path, confdir: Path) -> None:
    tape = tmp_path / "tape"
    options = {
        "brownout_record": str(tape),
        "brownout_metrics_listen": "127.0.0.1:0",
        "brownout_control_listen": "127.0.0.1:0",
    }
    with mock_upstream() as up:
        with running_proxy(confdir=confdir, extra_options=options) as proxy:
            with httpx.Client(proxy=proxy.proxy_url("flush"), timeout=10) as client:
                for i in range(20):
                    client.get(f"{up.url}/tools/weather?city=c{i}")
        # No waiting on the writer here: stopping the proxy must have written them all.
    [cassette] = read_dir(tape)
    assert [r.url.rsplit("=", 1)[1] for r in cassette.exchanges] == [f"c{i}" for i in range(20)]
