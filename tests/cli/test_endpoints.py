"""brownout's own endpoints: ports that cannot bind stop the start, execs run side by side, the
control token never leaves brownout, and empty configs are errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.proxy.config import BrownoutConfig, ControlConfig
from brownout.proxy.embed import ProxyStartError, running_proxy
from tests.cli.helpers import brownout_cmd, clean_env, free_port

README = Path(__file__).resolve().parents[2] / "README.md"
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(
    ("option", "what"), [("brownout_metrics_listen", "/metrics"), ("brownout_control_listen", "the control API")]
)
def test_an_endpoint_that_cannot_bind_stops_the_start_naming_it(
    confdir: Path, taken_port: int, option: str, what: str
) -> None:
    options = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}
    options[option] = f"127.0.0.1:{taken_port}"
    with pytest.raises(ProxyStartError, match=f"cannot serve {what} on 127.0.0.1:{taken_port}"):
        with running_proxy(confdir=confdir, extra_options=options):
            pass


def test_run_exits_non_zero_when_its_metrics_port_is_taken(confdir: Path, taken_port: int) -> None:
    result = subprocess.run(
        [*brownout_cmd(), "run", "--listen", f"127.0.0.1:{free_port()}", "--confdir", str(confdir),
         "--set", f"brownout_metrics_listen=127.0.0.1:{taken_port}", "--set", "brownout_control_listen=127.0.0.1:0"],
        capture_output=True, text=True, timeout=60, env=clean_env(),
    )  # fmt: skip
    assert result.returncode != 0
    assert f"cannot serve /metrics on 127.0.0.1:{taken_port}" in result.stderr + result.stdout


CHILD = """
import os, httpx
control, token = os.environ["BROWNOUT_CONTROL_URL"], os.environ["BROWNOUT_TOKEN"]
status = httpx.get(control + "/status", headers={"Authorization": "Bearer " + token}, trust_env=False)
metrics = httpx.get(os.environ["BROWNOUT_METRICS_URL"], trust_env=False)
print(status.status_code, "paused" in status.json(), metrics.status_code, "brownout_build_info" in metrics.text)
"""


def test_two_execs_at_once_both_get_metrics_and_a_control_api_with_a_token(confdir: Path) -> None:
    cmd = [*brownout_cmd(), "exec", "--confdir", str(confdir), "--", sys.executable, "-c", CHILD]
    env = clean_env()
    env.pop("BROWNOUT_TOKEN", None)
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=90) for p in procs]
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err
        assert out.split() == ["200", "True", "200", "True"], (out, err)
        assert "no token" not in err  # exec gives its control API a token
    announced = [line for _, err in outs for line in err.splitlines() if "BROWNOUT_CONTROL_URL=" in line]
    assert len(set(announced)) == 2  # different ports, both printed


@pytest.mark.parametrize("mode", ["regular", "reverse"])
def test_the_control_token_is_never_forwarded_upstream(
    brownout_proxy: Any, upstream: Any, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("BROWNOUT_TOKEN", "s3cret-control-token")
    proxy = brownout_proxy("version: 1\n", mode=mode, upstream=upstream)
    headers = {"Authorization": "Bearer s3cret-control-token"}
    if mode == "reverse":
        with httpx.Client(base_url=proxy.url, trust_env=False) as client:
            misdirected = client.get("/status", headers=headers)
            other = client.get("/tools/weather?city=Oslo", headers={"Authorization": "Bearer sk-agent-key"})
    else:
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
            misdirected = client.get(f"{upstream.url}/status", headers=headers)
            other = client.get(
                f"{upstream.url}/tools/weather?city=Oslo", headers={"Authorization": "Bearer sk-agent-key"}
            )
    assert misdirected.status_code == 421 and "control API" in misdirected.json()["error"]
    assert other.status_code == 200  # any other credential goes through as before
    seen = [r for r in upstream.requests_seen if r.path.startswith("/status")]
    assert seen == [] and not any("s3cret" in str(r.headers) for r in upstream.requests_seen)


def test_no_default_port_collides_with_a_port_the_readme_uses() -> None:
    defaults = {
        8080,
        int(ControlConfig().listen.rsplit(":", 1)[1]),
        int(BrownoutConfig().exporters.prometheus.listen.rsplit(":", 1)[1]),
    }
    assert len(defaults) == 3
    import re

    for text in [README.read_text(), *(p.read_text() for p in DOCS.glob("*.md"))]:
        for match in re.finditer(r"--listen\s+\S*?:(\d+)", text):
            port = int(match.group(1))
            assert port == 8080 or port not in defaults, match.group(0)


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing but a comment\n", "---\n"])
def test_an_empty_config_file_is_an_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text(text)
    result = subprocess.run([*brownout_cmd(), "validate", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"{path}: the config is empty" in result.stderr and "version: 1" in result.stderr
    path.write_text("version: 1\n")
    assert subprocess.run([*brownout_cmd(), "validate", str(path)], capture_output=True, timeout=60).returncode == 0


def test_one_job_proxies_take_free_ports_unless_an_address_is_named() -> None:
    from brownout.proxy.endpoints import free_endpoints

    free = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}
    assert free_endpoints(BrownoutConfig()) == free
    named = BrownoutConfig.model_validate({"exporters": {"prometheus": {"listen": "127.0.0.1:9464"}}})
    assert free_endpoints(named) == {"brownout_control_listen": "127.0.0.1:0"}
    assert free_endpoints(BrownoutConfig(), ["brownout_control_listen=127.0.0.1:7000"]) == {
        "brownout_metrics_listen": "127.0.0.1:0"
    }
