"""docs/realtime.md's worked example runs as written: every ```sh block, in order, in a fresh directory.

The first block starts the demo upstream, which the reader leaves running in a terminal of its own; here
it runs in the background on a free port, and that port replaces 8000 in the later blocks. The rest run
as one bash script (`set -euo pipefail`) with the virtualenv's `brownout` and `python` first on PATH and
no proxy variables inherited: the demo realtime agent (the openai SDK's realtime client) meets a broken
tool call and a session cap through brownout, recovers, and the page's claims are checked on what the
run wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.mdpages import DOCS, page

PAGE = DOCS / "realtime.md"
UPSTREAM = "python -m brownout.proxy.demo.upstream --port 8000"


def _blocks() -> list[str]:
    return [text for _, language, text in page(PAGE).code if language == "sh"]


def test_the_walkthrough_starts_the_upstream_first() -> None:
    blocks = _blocks()
    assert blocks[0].strip() == UPSTREAM
    assert any("demo.realtime_agent --upstream http://127.0.0.1:8000" in b for b in blocks)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_walkthrough_runs(tmp_path: Path) -> None:
    venv = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("BROWNOUT_")}
    env.update(PATH=f"{venv}{os.pathsep}{env.get('PATH', '')}", BROWNOUT_CONFDIR=str(tmp_path / "conf"))
    first, *rest = _blocks()
    upstream = subprocess.Popen(
        first.replace("--port 8000", "--port 0").split(), cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert upstream.stdout is not None
        port = upstream.stdout.readline().split()[-1]  # "LISTENING <port>"
        script = "set -euo pipefail\n" + "\n".join(rest).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)
    finally:
        upstream.terminate()
        upstream.wait(10)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]  # every turn answered: the agent survived both faults
    assert "turn 1: ok in 1 session(s), 1 tool error(s)" in run.stdout
    assert "sessions opened: 2; closed on the agent: 1001; error events: ['session_expired']" in run.stdout
    assert "faults fired: 2 (bad-tool-call malformed_json 1, session-cap close 1)" in out
    # The broken call is tool_arguments_json's, on the generation's span, naming the rule; the reconnect
    # backed off, so reconnect_discipline has nothing to say.
    violations = [json.loads(line) for line in (tmp_path / "violations.jsonl").read_text().splitlines()]
    assert [(v["invariant"], v["rule"], v["tool"]) for v in violations] == [
        ("tool_arguments_json", "bad-tool-call", "get_weather")
    ]
    sessions = [
        json.loads(line)["realtime"]
        for line in (tmp_path / "exchanges.jsonl").read_text().splitlines()
        if json.loads(line)["operation"] == "realtime_session"
    ]
    assert sorted((s["close_code"], s["closed_by"]) for s in sessions) == [(1000, "client"), (1001, "brownout")]
    assert "    ended: 1000 by client x1, 1001 by brownout x1\n" in run.stdout  # discover, as the page shows
