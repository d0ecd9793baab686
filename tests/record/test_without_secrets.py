"""Request bodies as recorded and as matched on replay: credentials out, everything else as sent."""

from __future__ import annotations

import json

import pytest

from brownout.proxy.record.redact import without_secrets

KEY = "sk-ant-PLANTED0123456789abcdefghij"


def test_known_key_formats_anywhere_in_a_body_are_blanked() -> None:
    body = f"plain text with {KEY} inside".encode()
    assert without_secrets(body) == b"plain text with REDACTED inside"


def test_credential_fields_of_a_json_body_are_blanked_at_any_depth_and_the_rest_kept() -> None:
    doc = {
        "query": "weather",
        "Api_Key": "abc123",
        "nested": [{"client_secret": "xyz", "code": "print(1)", "token": "next-page", "key": "cities"}],
        "password": 42,  # not a string: left as is
    }
    out = json.loads(without_secrets(json.dumps(doc).encode()))
    assert out["Api_Key"] == "REDACTED" and out["nested"][0]["client_secret"] == "REDACTED"
    assert out["query"] == "weather" and out["password"] == 42
    assert {k: out["nested"][0][k] for k in ("code", "token", "key")} == {
        "code": "print(1)",
        "token": "next-page",
        "key": "cities",
    }  # generic names are data, not credentials


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}',
        b"",
        b"\xff\xfe not utf-8",
        b'{"password": "unclosed',  # a field's name, but no JSON: untouched
        b"[" * 100_000 + b"]" * 100_000,  # too deep to parse: untouched
    ],
)
def test_a_body_without_credentials_comes_back_byte_for_byte(body: bytes) -> None:
    assert without_secrets(body) is body


def test_it_is_idempotent_so_recordings_and_live_requests_agree() -> None:
    body = json.dumps({"api_key": "abc", "note": f"key {KEY}"}, indent=2).encode()
    once = without_secrets(body)
    assert once != body and without_secrets(once) == once
