"""Shared by the Bedrock proxy tests: a real boto3 bedrock-runtime client, requests, and SigV4 checks."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

__all__ = [
    "CREDENTIALS",
    "HAIKU",
    "TOOLS",
    "claude_body",
    "client",
    "converse",
    "converse_stream",
    "invoke_stream",
    "model",
    "signature_holds",
]

CREDENTIALS = Credentials("AKIDEXAMPLEBROWNOUT", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
REGION = "us-east-1"
HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
TOOLS = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "description": "Current weather in a city.",
                "inputSchema": {
                    "json": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
                },
            }
        }
    ]
}
HELLO = [{"role": "user", "content": [{"text": "What is the weather in Paris?"}]}]


def model(case: str) -> str:
    """A model id that rules can pick out with `model: "*case-<case>-*"` (the mock answers any model)."""
    return f"anthropic.claude-case-{case}-v1:0"


def client(endpoint_url: str | None = None, *, attempts: int = 1, read_timeout_s: float = 10, **kwargs: Any) -> Any:
    """boto3's bedrock-runtime client with dummy credentials; `attempts` counts the first try (standard retries)."""
    config = Config(retries={"mode": "standard", "total_max_attempts": attempts}, read_timeout=read_timeout_s,
                    connect_timeout=5)  # fmt: skip
    return boto3.client(
        "bedrock-runtime",
        region_name=REGION,
        endpoint_url=endpoint_url,
        aws_access_key_id=CREDENTIALS.access_key,
        aws_secret_access_key=CREDENTIALS.secret_key,
        config=config,
        **kwargs,
    )


def converse(c: Any, model_id: str = HAIKU, tools: bool = False) -> dict[str, Any]:
    extra = {"toolConfig": TOOLS} if tools else {}
    result: dict[str, Any] = c.converse(modelId=model_id, messages=HELLO, **extra)
    return result


def converse_stream(c: Any, model_id: str = HAIKU, tools: bool = True) -> list[dict[str, Any]]:
    """Every event of a ConverseStream call, iterated to its end (a mid-stream error raises here)."""
    extra = {"toolConfig": TOOLS} if tools else {}
    return list(c.converse_stream(modelId=model_id, messages=HELLO, **extra)["stream"])


def claude_body(**extra: Any) -> str:
    return json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
                       "messages": [{"role": "user", "content": "Say hello"}], **extra})  # fmt: skip


def invoke_stream(c: Any, model_id: str = HAIKU) -> list[dict[str, Any]]:
    """Claude's events out of an InvokeModelWithResponseStream call, decoded as an agent does."""
    events = c.invoke_model_with_response_stream(modelId=model_id, body=claude_body())["body"]
    return [json.loads(ev["chunk"]["bytes"]) for ev in events]


def signature_holds(method: str, url: str, headers: dict[str, str], body: bytes) -> bool:
    """Whether the request as it arrived still carries a valid SigV4 signature for its bytes."""
    auth = headers["authorization"]
    signed = auth.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")
    request = AWSRequest(method=method, url=url, data=body, headers={h: headers[h] for h in signed})
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(CREDENTIALS, "bedrock", REGION)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    assert urlsplit(url).path  # the path as it arrived is what was signed (percent-encoding included)
    return auth.rsplit("Signature=", 1)[1] == expected
