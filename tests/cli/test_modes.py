"""`--mode` is checked before anything starts: `reverse:` needs http(s)://HOST[:PORT], and the error says so."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.embed import ProxyStartError, running_proxy
from brownout.proxy.modes import check_mode
from tests.cli.helpers import brownout_cmd, clean_env, free_port, wait_for_port
from tests.cli.test_cli import FREE_ENDPOINTS
from tests.proxy.test_unreachable import closed_port

VALID = [
    "regular",
    "reverse:https://api.openai.com",
    "reverse:https://api.openai.com/",
    "reverse:http://127.0.0.1:8765",
    "reverse:http://[::1]:8765",
    "reverse:http://ollama:11434@127.0.0.1:8090",
    "upstream:http://corporate-proxy:3128",
    "socks5",
]


@pytest.mark.parametrize("spec", VALID)
def test_valid_modes_pass_unchanged(spec: str) -> None:
    assert check_mode(spec) == spec


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            "reverse:foo",
            "needs its scheme: reverse:https://HOST[:PORT] or reverse:http://HOST[:PORT]; "
            "did you mean reverse:https://foo or reverse:http://foo?",
        ),
        ("reverse:", "needs its scheme"),
        ("reverse:api.openai.com:443", "did you mean reverse:https://api.openai.com:443"),
        (
            "reverse:https://api.openai.com/v1",
            "write reverse:https://api.openai.com and keep /v1 in the client's base URL",
        ),
        ("reverse:http://127.0.0.1:99999", "Invalid port: 99999; write reverse:https://HOST[:PORT]"),
        ("reverse:ftp://files.example", "Invalid server scheme: ftp"),
        ("reverse:tcp://db.internal:5432", "a tcp:// upstream would pass through it unseen"),
        ("reverse:http://", "write reverse:https://HOST[:PORT] or reverse:http://HOST[:PORT]"),
        ("revers:https://api.openai.com", "unknown mode; brownout runs as 'regular'"),
    ],
)
def test_bad_modes_say_what_to_write(spec: str, says: str) -> None:
    with pytest.raises(ValueError) as err:
        check_mode(spec)
    assert says in str(err.value) and repr(spec) in str(err.value)


@pytest.mark.parametrize("command", ["run", "exec"])
@pytest.mark.parametrize("spec", ["reverse:foo", "nonsense"])
def test_the_cli_rejects_a_bad_mode_before_starting(command: str, spec: str, tmp_path: Path) -> None:
    confdir = tmp_path / "confdir"
    args = [command, "--mode", spec, "--confdir", str(confdir), *(["--", "true"] if command == "exec" else [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '--mode': '{spec}'" in result.output
    assert "reverse:https://HOST[:PORT]" in result.output and "Traceback" not in result.output
    assert not confdir.exists()  # nothing started: not even the CA was made


def test_embedding_rejects_a_bad_mode(confdir: Path) -> None:
    with pytest.raises(ProxyStartError, match="'reverse:foo': the upstream URL needs its scheme"):
        with running_proxy(mode="reverse:foo", confdir=confdir):
            pass


def test_an_https_reverse_target_starts(confdir: Path) -> None:
    options = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}
    with running_proxy(mode="reverse:https://api.openai.com", confdir=confdir, extra_options=options) as proxy:
        assert proxy.mode == ["reverse:https://api.openai.com"]


def test_run_in_reverse_mode_warns_once_when_the_upstream_refuses(confdir: Path) -> None:
    """What the user sees in their terminal: one warning naming the upstream and the cause."""
    upstream_port = closed_port()
    port = free_port()
    cmd = [*brownout_cmd(), "run", "--mode", f"reverse:http://127.0.0.1:{upstream_port}"]
    cmd += ["--listen", f"127.0.0.1:{port}", "--confdir", str(confdir), *FREE_ENDPOINTS]
    proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, proc)
        with httpx.Client(trust_env=False) as client:
            for _ in range(3):
                with pytest.raises(httpx.TransportError):
                    client.get(f"http://127.0.0.1:{port}/v1/models")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    both: Any = out + err
    assert proc.returncode == 0, both
    assert both.count(f"cannot reach upstream 127.0.0.1:{upstream_port} (refused)") == 1, both
    assert "is the server up" in both
