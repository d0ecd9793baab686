"""docs/realtime.md's worked example runs as written (tests/docs/walkthrough.py): the demo realtime agent
(the openai SDK's realtime client) meets a broken tool call and a session cap through brownout, recovers,
and the page's claims are checked on what the run wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.docs.mdpages import DOCS
from tests.docs.walkthrough import UPSTREAM, run_walkthrough, sh_blocks

PAGE = DOCS / "realtime.md"


def _blocks() -> list[str]:
    return sh_blocks(PAGE)


def test_the_walkthrough_starts_the_upstream_first() -> None:
    blocks = _blocks()
    assert blocks[0].strip() == UPSTREAM
    assert any("demo.realtime_agent --upstream http://127.0.0.1:8000" in b for b in blocks)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_walkthrough_runs(tmp_path: Path) -> None:
    run = run_walkthrough(PAGE, tmp_path, timeout_s=280)
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
