"""The `brownout` CLI: validate, schema, env, exec, run."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from brownout.proxy.certs import CA_CERT_NAME
from brownout.proxy.cli import main
from tests.cli.helpers import REPO, brownout_cmd, clean_env, free_port, wait_for_port

# `brownout run` serves /metrics and the control API on 9464 and 9465 unless told otherwise: free ports
# here, so a brownout already running on the machine (or a test on another worker) cannot collide.
FREE_ENDPOINTS = ["--set", "brownout_metrics_listen=127.0.0.1:0", "--set", "brownout_control_listen=127.0.0.1:0"]

ENV_VARS = {
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "AWS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "NODE_USE_ENV_PROXY",
}


def test_validate_good(tmp_path: Path) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text("seed: 3\nrules:\n  - name: slow\n    fault: {type: latency, delay_ms: 10}\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "ok (1 rules, seed 3)" in result.output


def test_validate_bad_names_field_and_line(tmp_path: Path) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text("rules:\n  - name: boom\n    fault:\n      type: http_error\n      status: 99\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1
    assert f"{path}:5: rules[0].fault.status: Input should be greater than or equal to 400" in result.output


@pytest.mark.parametrize("text", ["?\n", "- a\n- b\n", "hello\n", "1: x\n", "rules:\n  - ? \n    name: a\n"])
def test_validate_odd_yaml_is_a_config_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output  # not a traceback
    assert result.output.startswith(f"brownout: {path}:"), result.output


def test_validate_yaml_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text("seed: 1\nrules: [\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1
    assert f"{path}:3: YAML syntax error" in result.output


@pytest.mark.parametrize("args", [["schema"], ["schema", "--kind", "config"]])
def test_schema_is_json(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema["type"] == "object" and "rules" in schema["properties"]


def test_env_prints_every_variable_shell_quoted(confdir: Path) -> None:
    result = CliRunner().invoke(
        main, ["env", "--listen", "127.0.0.1:9911", "--session", "a b", "--confdir", str(confdir)]
    )
    assert result.exit_code == 0, result.output
    exported: dict[str, str] = {}
    for line in result.output.splitlines():
        words = shlex.split(line)
        assert words[0] == "export"
        name, _, value = words[1].partition("=")
        exported[name] = value
    assert set(exported) == ENV_VARS
    assert exported["HTTPS_PROXY"] == "http://a%20b@127.0.0.1:9911"
    bundle = Path(exported["SSL_CERT_FILE"]).read_text()
    assert (confdir / CA_CERT_NAME).read_text().strip() in bundle
    assert bundle.count("BEGIN CERTIFICATE") > 100  # the usual roots are there too
    assert exported["NODE_EXTRA_CA_CERTS"] == str(confdir / CA_CERT_NAME)


def test_env_creates_the_ca(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["env", "--confdir", str(tmp_path / "new")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "new" / CA_CERT_NAME).exists()
    assert "export HTTP_PROXY=http://127.0.0.1:8080" in result.output


CHILD = """
import json, os, sys
json.dump({k: os.environ.get(k) for k in ("HTTPS_PROXY", "SSL_CERT_FILE", "NODE_USE_ENV_PROXY")}, sys.stdout)
import httpx  # through the proxy, trusting only the bundle: works only if brownout relays and re-signs
r = httpx.get(sys.argv[1] + "/tools/weather?city=Oslo")
sys.exit(3 if r.json()["city"] == "Oslo" else 1)
"""


def test_exec_passes_env_and_exit_status(tmp_path: Path, confdir: Path, upstream_tls: Any) -> None:
    cmd = [
        *brownout_cmd(),
        "exec",
        "--confdir",
        str(confdir),
        "--session",
        "s1",
        "--set",
        f"ssl_verify_upstream_trusted_ca={upstream_tls.ca_pem_path}",
        "--",
        sys.executable,
        "-c",
        CHILD,
        upstream_tls.url,
    ]
    proc = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["HTTPS_PROXY"].startswith("http://s1@127.0.0.1:")
    assert seen["SSL_CERT_FILE"] == str(confdir / "brownout-ca-bundle.pem")
    assert seen["NODE_USE_ENV_PROXY"] == "1"
    assert any(r.path.startswith("/tools/weather") for r in upstream_tls.requests_seen)


def test_exec_missing_command_exits_127(confdir: Path) -> None:
    result = subprocess.run(
        [*brownout_cmd(), "exec", "--confdir", str(confdir), "--", "no-such-command-x"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 127
    assert "no-such-command-x" in result.stderr


def test_exec_rejects_bad_config_before_running(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: [\n")
    result = CliRunner().invoke(main, ["exec", "-c", str(bad), "--", "true"])
    assert result.exit_code == 1 and "YAML syntax error" in result.output


@pytest.mark.parametrize("command", ["run", "exec"])
def test_an_experiment_file_given_as_config_says_how_to_run_it(command: str) -> None:
    exp = REPO / "examples" / "experiment" / "exp.yaml"
    args = [command, "-c", str(exp), *(["--", "true"] if command == "exec" else [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert f"is an experiment file (agent:, phases:): run it with `brownout experiment run {exp}`" in result.output


def test_run_foreground_serves_and_stops_on_sigterm(confdir: Path, upstream: Any) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*brownout_cmd(), "run", "--listen", f"127.0.0.1:{port}", "--confdir", str(confdir), *FREE_ENDPOINTS],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        wait_for_port(port, proc)
        import httpx

        with httpx.Client(proxy=f"http://127.0.0.1:{port}", trust_env=False) as client:
            assert client.get(f"{upstream.url}/tools/weather?city=Rome").json()["city"] == "Rome"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"listening on http://127.0.0.1:{port}" in out
    assert f"CA bundle: {confdir}/brownout-ca-bundle.pem" in out
    assert 'eval "$(brownout env' in out


def test_run_warns_on_non_loopback(confdir: Path) -> None:
    proc = subprocess.Popen(
        [*brownout_cmd(), "run", "--listen", "0.0.0.0:0", "--confdir", str(confdir), *FREE_ENDPOINTS],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # until the ready line: startup finished
            if "listening on" in line:
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "not loopback" in err
    assert proc.returncode == 0


def test_python_dash_m_proxy() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "brownout.proxy", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=60,
    )
    assert result.returncode == 0 and "validate" in result.stdout


def test_demo_command_runs_the_demo() -> None:
    pytest.importorskip("brownout.proxy.demo.run")
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0, result.output
