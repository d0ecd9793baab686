"""Acceptance: clients configured only by `eval "$(brownout env)"` talk HTTPS through brownout.

The clients run in a bash subprocess with no proxy or CA in their code: the environment is all they
get. The TLS mock upstream has its own CA, which only the proxy trusts (ssl_verify_upstream_trusted_ca);
the clients trust brownout's bundle. So a success proves the traffic went through brownout.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cli.helpers import clean_env

OPENAI_CLIENT = """
import json, os, sys
import openai
assert "HTTPS_PROXY" in os.environ and "SSL_CERT_FILE" in os.environ
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-test", max_retries=0)
messages = [{"role": "user", "content": "Say hello"}]
done = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
parts = [c.choices[0].delta.content or "" for c in
         client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True) if c.choices]
print(json.dumps({"text": done.choices[0].message.content, "streamed": "".join(parts), "chunks": len(parts)}))
"""

ANTHROPIC_CLIENT = """
import json, sys
import anthropic
client = anthropic.Anthropic(base_url=sys.argv[1], api_key="sk-ant-test", max_retries=0)
messages = [{"role": "user", "content": "Say hello"}]
done = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=messages)
with client.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=messages) as stream:
    streamed = "".join(stream.text_stream)
print(json.dumps({"text": done.content[0].text, "streamed": streamed}))
"""


BEDROCK_CLIENT = """
import json, os, sys
import boto3
assert "HTTPS_PROXY" in os.environ and "AWS_CA_BUNDLE" in os.environ
client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=sys.argv[1],
                      aws_access_key_id="AKIDEXAMPLEBROWNOUT",
                      aws_secret_access_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
model, messages = "anthropic.claude-3-haiku-20240307-v1:0", [{"role": "user", "content": [{"text": "Say hello"}]}]
done = client.converse(modelId=model, messages=messages)
streamed = [e for e in client.converse_stream(modelId=model, messages=messages)["stream"]]
print(json.dumps({"text": done["output"]["message"]["content"][0]["text"], "events": len(streamed),
                  "stop": streamed[-2]["messageStop"]["stopReason"]}))
"""


def _run_with_brownout_env(proxy: Any, script: str, target: str, tmp_path: Path) -> dict[str, Any]:
    client = tmp_path / "client.py"
    client.write_text(textwrap.dedent(script))
    shell = (
        f'eval "$(brownout env --listen {proxy.host}:{proxy.port} --confdir {proxy.confdir})" '
        f"&& exec python {client} {target}"
    )
    proc = subprocess.run(["bash", "-c", shell], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_openai_sdk_over_https_via_env(upstream_tls: Any, brownout_proxy: Callable[..., Any], tmp_path: Path) -> None:
    exchanges: list[Any] = []
    proxy = brownout_proxy(upstream=upstream_tls, on_exchange=exchanges.append)
    result = _run_with_brownout_env(proxy, OPENAI_CLIENT, upstream_tls.url, tmp_path)
    assert result["text"] and result["streamed"]
    assert result["chunks"] > 1
    assert [r.path for r in upstream_tls.requests_seen] == ["/v1/chat/completions"] * 2
    assert len(exchanges) == 2


def test_anthropic_sdk_over_https_via_env(
    upstream_tls: Any, brownout_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    proxy = brownout_proxy(upstream=upstream_tls)
    result = _run_with_brownout_env(proxy, ANTHROPIC_CLIENT, upstream_tls.url, tmp_path)
    assert result["text"] and result["streamed"]
    assert [r.path for r in upstream_tls.requests_seen] == ["/v1/messages"] * 2


def test_boto3_bedrock_over_https_via_env_with_its_signatures_intact(
    upstream_tls: Any, brownout_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    from tests.proxy.bedrock_support import signature_holds
    from tests.proxy.test_passthrough import wait_for

    exchanges: list[Any] = []
    proxy = brownout_proxy(upstream=upstream_tls, on_exchange=exchanges.append)
    result = _run_with_brownout_env(proxy, BEDROCK_CLIENT, upstream_tls.url, tmp_path)
    assert result["text"] and result["events"] > 4 and result["stop"] == "end_turn"
    wait_for(exchanges, 2)
    assert [e.provider for e in exchanges] == ["bedrock", "bedrock"] and exchanges[1].stream_complete is True
    for seen in upstream_tls.requests_seen:  # signed for the upstream's host, and not one byte changed
        assert signature_holds(seen.method, upstream_tls.url + seen.path, seen.headers, seen.body)


def test_without_brownout_env_the_upstream_ca_is_not_trusted(upstream_tls: Any, tmp_path: Path) -> None:
    # the control: the same client, no brownout, fails verification (so the tests above prove proxying)
    client = tmp_path / "client.py"
    client.write_text(
        textwrap.dedent(OPENAI_CLIENT).replace(
            'assert "HTTPS_PROXY" in os.environ and "SSL_CERT_FILE" in os.environ', ""
        )
    )
    proc = subprocess.run(
        ["python", str(client), upstream_tls.url], env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    assert "APIConnectionError" in proc.stderr or "CERTIFICATE_VERIFY_FAILED" in proc.stderr


def test_session_name_reaches_brownout(upstream_tls: Any, brownout_proxy: Callable[..., Any], tmp_path: Path) -> None:
    session = "agent-7"
    exchanges: list[Any] = []
    proxy = brownout_proxy(upstream=upstream_tls, on_exchange=exchanges.append)
    client = tmp_path / "client.py"
    client.write_text("import httpx, sys\nprint(httpx.get(sys.argv[1] + '/tools/weather?city=Lima').status_code)\n")
    shell = (
        f'eval "$(brownout env --listen {proxy.host}:{proxy.port} --confdir {proxy.confdir} --session {session})"'
        f" && python {client} {upstream_tls.url}"
    )
    proc = subprocess.run(["bash", "-c", shell], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "200", proc.stderr
    assert [e.session for e in exchanges] == [session]
