"""The framework example (examples/experiment/framework_agent.py, OpenAI Agents SDK) straight at the demo
upstream; test_example_commands.py runs it through `brownout experiment run exp-framework.yaml`."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "experiment"
AGENT = EXAMPLES / "framework_agent.py"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def _has_agents_sdk() -> bool:
    try:
        importlib.metadata.version("openai-agents")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(
        not _has_agents_sdk(), reason="the OpenAI Agents SDK (pip install openai-agents) is not installed"
    ),
    pytest.mark.timeout(150),
]


def test_framework_agent_direct(demo_env: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    env["DEMO_UPSTREAM"] = demo_env
    done = subprocess.run(
        [sys.executable, str(AGENT), "Tokyo"], env=env, cwd=EXAMPLES, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ANSWER: "), done.stdout
    assert "18" in done.stdout  # the mock weather tool's temperature made it into the answer
