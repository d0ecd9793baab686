"""`brownout exec` and `brownout run` say what happened when the proxy stops: exchanges, faults and
violations with the numbers that crossed the wire, where logs and cassettes went, and, when no request
reached brownout, that the client went around it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx

from tests.cli.helpers import brownout_cmd, clean_env, free_port, wait_for_port

FREE_ENDPOINTS = ["--set", "brownout_metrics_listen=127.0.0.1:0", "--set", "brownout_control_listen=127.0.0.1:0"]

# Three chat completions with the official SDK (the first answered 429 by the rule: the SDK retries it)
# and two tool calls: 4 openai chat exchanges, 2 http execute_tool exchanges, 1 fault.
AGENT = """
import sys, httpx, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-test")
for _ in range(3):
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
for city in ("Oslo", "Lima"):
    httpx.get(sys.argv[1] + "/tools/weather", params={"city": city}, timeout=10).raise_for_status()
print("done")
"""

CHAOS = """
version: 1
rules:
  - name: first-429
    match: {provider: openai}
    fault: {type: http_error, status: 429}
    schedule: {first: 1}
invariants:
  - {type: call_budget, max_calls: 2}
exporters:
  jsonl: {path: logs/violations.jsonl, exchanges_path: logs/exchanges.jsonl}
record: {dir: cassettes}
"""

# Straight to the upstream whatever HTTP_PROXY says: what a client that ignores the proxy does.
DIRECT = "import httpx, sys; httpx.get(sys.argv[1] + '/tools/weather?city=Rome', timeout=10).raise_for_status()"
IGNORES_PROXY = DIRECT.replace("timeout=10", "timeout=10, trust_env=False")


def _exec(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*brownout_cmd(), "exec", *args], env=clean_env(), cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_exec_summarises_what_the_sdk_sent_and_where_it_went(tmp_path: Path, confdir: Path, upstream: Any) -> None:
    conf, work = tmp_path / "conf", tmp_path / "work"
    conf.mkdir(), work.mkdir()
    (conf / "chaos.yaml").write_text(CHAOS)
    (work / "agent.py").write_text(textwrap.dedent(AGENT))
    args = ["-c", str(conf / "chaos.yaml"), "--confdir", str(confdir), "--session", "s1", "--summary-json", "s.json"]
    proc = _exec([*args, "--", sys.executable, "agent.py", upstream.url], work)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr

    summary = json.loads((work / "s.json").read_text())  # --summary-json: relative to the working directory
    assert summary["exchanges"] == {"total": 6, "by_provider": {"http": {"execute_tool": 2}, "openai": {"chat": 4}}}
    assert summary["faults"] == {"total": 1, "by_rule": {"first-429": {"http_error": 1}}}
    logged = [json.loads(line) for line in (conf / "logs" / "violations.jsonl").read_text().splitlines()]
    assert logged and summary["violations"]["total"] == len(logged)
    assert summary["violations"]["by_invariant"] == {"call_budget": {logged[0]["severity"]: len(logged)}}
    exchange_log = (conf / "logs" / "exchanges.jsonl").read_text().splitlines()
    assert len(exchange_log) == 6  # the same exchanges the log has, written beside the config
    # What upstream sent is recorded: everything but the 429 the rule answered itself.
    assert summary["cassettes"]["recorded"] == len(upstream.requests_seen) == 5
    assert summary["files"] == {
        "violation_log": str(conf / "logs" / "violations.jsonl"),
        "exchange_log": str(conf / "logs" / "exchanges.jsonl"),
        "record_dir": str(conf / "cassettes"),
    }
    assert summary["warning"] is None and summary["no_traffic"] is False

    err = proc.stderr
    assert "exchanges: 6 (http execute_tool 2, openai chat 4)" in err
    assert "faults fired: 1 (first-429 http_error 1)" in err
    assert f"violations: {len(logged)} (call_budget {logged[0]['severity']} {len(logged)})" in err
    assert f"violation log: {conf / 'logs' / 'violations.jsonl'}" in err
    assert f"cassettes recorded to: {conf / 'cassettes'} (5 exchanges)" in err
    assert "no request reached brownout" not in err


def test_exec_warns_when_no_request_reached_brownout(tmp_path: Path, confdir: Path, upstream: Any) -> None:
    proc = _exec(
        [
            "--confdir",
            str(confdir),
            "--summary-json",
            "s.json",
            "--",
            sys.executable,
            "-c",
            IGNORES_PROXY,
            upstream.url,
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert [r.path for r in upstream.requests_seen] == ["/tools/weather?city=Rome"]  # done, around brownout
    [warning] = [line for line in proc.stderr.splitlines() if "no request reached brownout" in line]
    assert warning.startswith("brownout: warning: ")
    for cause in ("HTTP(S)_PROXY", "Node before 24", "Go for loopback", "NO_PROXY", "ignore_hosts", "reverse"):
        assert cause in warning, cause
    assert "exchanges: none" in proc.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["no_traffic"] is True and summary["warning"] in warning


def test_quiet_drops_the_summary_but_neither_the_warning_nor_the_json(
    tmp_path: Path, confdir: Path, upstream: Any
) -> None:
    base = ["--confdir", str(confdir), "--quiet", "--summary-json", "s.json", "--", sys.executable, "-c"]
    through = _exec([*base, DIRECT, upstream.url], tmp_path)
    assert through.returncode == 0, through.stderr
    assert "summary" not in through.stderr and "warning" not in through.stderr
    assert json.loads((tmp_path / "s.json").read_text())["exchanges"]["total"] == 1
    around = _exec([*base, IGNORES_PROXY, upstream.url], tmp_path)
    assert "summary" not in around.stderr and "no request reached brownout" in around.stderr


def test_requests_to_ignored_hosts_are_named_as_such(tmp_path: Path, confdir: Path, upstream: Any) -> None:
    (tmp_path / "chaos.yaml").write_text("version: 1\nproxy: {ignore_hosts: ['127.0.0.1']}\n")
    proc = _exec(
        ["-c", "chaos.yaml", "--confdir", str(confdir), "--", sys.executable, "-c", DIRECT, upstream.url], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "all 1 requests that reached brownout went to hosts in proxy.ignore_hosts" in proc.stderr
    assert "ignored: 1 requests" in proc.stderr


def _run_brownout(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*brownout_cmd(), "run", *args],
        env=clean_env(),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ready(proc: subprocess.Popen[str]) -> list[str]:
    """The start-up lines, up to the last one (signals are handled from then on)."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("Point a"):
            return lines
    raise AssertionError(f"brownout run ended before it was ready: {lines}")


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_run_prints_where_everything_is_and_a_summary_at_the_stop(tmp_path: Path, confdir: Path, upstream: Any) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "chaos.yaml").write_text("version: 1\nexporters: {jsonl: {decisions_path: decisions.jsonl}}\n")
    port = free_port()
    args = ["-c", str(conf / "chaos.yaml"), "--listen", str(port), "--confdir", str(confdir), "--record", "tapes"]
    proc = _run_brownout([*args, "--summary-json", "out/summary.json", *FREE_ENDPOINTS], tmp_path)
    try:
        lines = _ready(proc)
        wait_for_port(port, proc)  # a bare port: 127.0.0.1:PORT
        with httpx.Client(proxy=f"http://127.0.0.1:{port}", trust_env=False) as client:
            assert client.get(f"{upstream.url}/tools/weather?city=Rome").status_code == 200
    finally:
        _, err = _stop(proc)
    assert proc.returncode == 0, err
    assert f"brownout proxy listening on http://127.0.0.1:{port} (mode regular)" in lines
    assert f"CA bundle: {confdir}/brownout-ca-bundle.pem" in lines
    metrics = next(line for line in lines if line.startswith("metrics: "))
    assert metrics.startswith("metrics: http://127.0.0.1:") and metrics.endswith("/metrics")
    assert any(line.startswith("control API: http://127.0.0.1:") for line in lines)
    assert f"decision log: {conf / 'decisions.jsonl'}" in lines  # the config file's directory
    assert f"cassettes recorded to: {tmp_path / 'tapes'}" in lines  # --record: the working directory
    [hint] = [line for line in lines if line.startswith("Point an agent at it: ")]
    assert hint == f'Point an agent at it: eval "$(brownout env --listen 127.0.0.1:{port} --confdir {confdir})"'
    assert "exchanges: 1 (http execute_tool 1)" in err and "no request reached brownout" not in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["exchanges"]["total"] == 1 and summary["cassettes"]["recorded"] == 1

    # The hint, as printed, gives the agent's shell exactly this proxy and this CA.
    shell = hint.split('eval "$(', 1)[1].rsplit(')"', 1)[0]
    exports = subprocess.run(["bash", "-c", shell], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert f"HTTPS_PROXY=http://127.0.0.1:{port}" in exports.stdout
    assert f"SSL_CERT_FILE={confdir}/brownout-ca-bundle.pem" in exports.stdout


def test_a_run_that_saw_nothing_says_so_at_the_stop(tmp_path: Path, confdir: Path) -> None:
    port = free_port()
    proc = _run_brownout(["--listen", f"127.0.0.1:{port}", "--confdir", str(confdir), *FREE_ENDPOINTS], tmp_path)
    try:
        _ready(proc)
    finally:
        _, err = _stop(proc)
    assert proc.returncode == 0, err
    assert "exchanges: none" in err and "brownout: warning: no request reached brownout" in err


def test_a_port_in_use_is_reported_once_naming_listen(tmp_path: Path, confdir: Path, taken_port: int) -> None:
    port = taken_port
    proc = subprocess.run(
        [*brownout_cmd(), "run", "--listen", str(port), "--confdir", str(confdir), *FREE_ENDPOINTS],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert said.count("address already in use") == 1, said
    assert f"cannot listen on 127.0.0.1:{port}" in said and "--listen" in said
    assert "--mode" not in said and "Errno" not in said


def test_a_command_that_cannot_start_is_not_called_a_bypass(tmp_path: Path, confdir: Path) -> None:
    proc = _exec(["--confdir", str(confdir), "--", "no-such-command-x"], tmp_path)
    assert proc.returncode == 127 and "cannot run 'no-such-command-x'" in proc.stderr
    assert "exchanges: none" in proc.stderr and "no request reached brownout" not in proc.stderr
