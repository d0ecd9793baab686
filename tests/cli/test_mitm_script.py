"""`mitmdump -s proxy/mitm_script.py --set brownout_config=...` loads brownout into plain mitmdump."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.cli.helpers import BIN, REPO, clean_env, free_port, wait_for_port

CONFIG = """\
seed: 1
exporters: {prometheus: {listen: "127.0.0.1:0"}}
control: {listen: "127.0.0.1:0"}
proxy:
  announce_faults: true
rules:
  - name: weather-down
    match: {path: /tools/weather}
    fault: {type: http_error, status: 503}
"""


def test_mitmdump_loads_the_script_and_applies_the_config(tmp_path: Path, upstream: Any) -> None:
    config = tmp_path / "chaos.yaml"
    config.write_text(CONFIG)
    port = free_port()
    cmd = [
        str(BIN / "mitmdump"),
        "-q",
        "-s",
        str(REPO / "proxy" / "mitm_script.py"),
        "--listen-host",
        "127.0.0.1",
        "--listen-port",
        str(port),
        "--set",
        f"confdir={tmp_path / 'confdir'}",
        "--set",
        f"brownout_config={config}",
    ]
    # run from elsewhere: the script must find the package, not rely on the current directory
    proc = subprocess.Popen(
        cmd, env=clean_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_for_port(port, proc)
        with httpx.Client(proxy=f"http://127.0.0.1:{port}", trust_env=False, timeout=30) as client:
            faulted = client.get(f"{upstream.url}/tools/weather?city=Oslo")
            passed = client.get(f"{upstream.url}/tools/search?q=x")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert faulted.status_code == 503, out
    assert "x-brownout-fault" in faulted.headers
    assert passed.status_code == 200, out
    assert [r.path.split("?")[0] for r in upstream.requests_seen] == ["/tools/search"]


def test_mitmdump_rejects_a_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("rules:\n  - name: x\n    fault: {type: http_error, status: 99}\n")
    cmd = [
        str(BIN / "mitmdump"),
        "-s",
        str(REPO / "proxy" / "mitm_script.py"),
        "--listen-port",
        str(free_port()),
        "--set",
        f"confdir={tmp_path / 'confdir'}",
        "--set",
        f"brownout_config={config}",
    ]
    proc = subprocess.run(cmd, env=clean_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f"{config}:3: rules[0].fault.status" in proc.stdout + proc.stderr
