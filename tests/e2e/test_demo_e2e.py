"""`brownout demo` as a user runs it: a subprocess whose report ends with the invariant violations."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_brownout_demo_prints_violations() -> None:
    exe = Path(sys.executable).with_name("brownout")
    cmd = [str(exe), "demo"] if exe.exists() else [sys.executable, "-m", "brownout.proxy", "demo"]
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "Invariant violations" in out
    table = out[out.index("Invariant violations") :]
    # proxy/demo/chaos.yaml: slow-weather-tool adds 300 ms, the latency budget is 250 ms.
    assert re.search(r"latency_budget\s*│\s*warning\s*│.*exchange took \d+ ms, budget 250 ms", table), table
    summary = re.search(r"violations: (\d+)", out)
    assert summary and int(summary.group(1)) >= 1
    # The faults of the bundled schedule were injected and shown per exchange.
    assert "faults injected: 3" in out
