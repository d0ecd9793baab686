"""`brownout exec` and `brownout run` with --record/--replay and the config file's `record:`/`replay:`
sections, end to end, and an embedded proxy flushing its cassettes when it stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from brownout.proxy.embed import running_proxy
from brownout.proxy.record.cassette import read_dir
from tests.cli.helpers import brownout_cmd, clean_env, free_port, wait_for_port
from tests.record.support import mock_upstream, wait_recorded

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


@contextmanager
def brownout_run(confdir: Path, *args: str) -> Iterator[str]:
    """`brownout run ARGS` in the foreground of a subprocess, stopped with SIGTERM; yields its proxy URL."""
    port = free_port()
    cmd = [*brownout_cmd(), "run", "--listen", f"127.0.0.1:{port}", "--confdir", str(confdir), *args]
    cmd += ["--set", "brownout_metrics_listen=127.0.0.1:0", "--set", "brownout_control_listen=127.0.0.1:0"]
    proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "brownout stopped." in out


def test_run_records_with_the_flag_and_replays_from_the_config_file(tmp_path: Path, confdir: Path) -> None:
    tape = tmp_path / "tape"
    with mock_upstream() as up, brownout_run(confdir, "--record", str(tape)) as proxy:
        live = httpx.get(f"{up.url}/tools/weather?city=Lima", proxy=f"http://run-1@{proxy[7:]}", timeout=10)
        url = up.url
    [cassette] = read_dir(tape)  # SIGTERM wrote it out
    assert cassette.session == "run-1" and len(cassette.exchanges) == 1

    config = tmp_path / "replay.yaml"
    config.write_text(f"replay: {{dir: {tape}, speed: 0}}\n", encoding="utf-8")
    with brownout_run(confdir, "-c", str(config)) as proxy:
        with httpx.Client(proxy=f"http://run-1@{proxy[7:]}", timeout=10) as client:
            replayed = client.get(f"{url}/tools/weather?city=Lima")
            missed = client.get(f"{url}/tools/weather?city=Oslo")
    assert (replayed.status_code, replayed.text) == (200, live.text) and "Lima" in live.text
    assert missed.status_code == 404 and "no recorded answer" in missed.text


def test_the_config_files_record_section_records(brownout_proxy, tmp_path: Path) -> None:
    tape = tmp_path / "tape"
    with mock_upstream() as up:
        proxy = brownout_proxy(f"record: {{dir: {tape}}}\n")
        with httpx.Client(proxy=proxy.proxy_url("from-config"), timeout=10) as client:
            client.get(f"{up.url}/tools/weather?city=Kyiv")
        wait_recorded(proxy, 1)
    [cassette] = read_dir(tape)
    assert cassette.session == "from-config" and "Kyiv" in cassette.exchanges[0].url
