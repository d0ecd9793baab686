from __future__ import annotations

import json

import pytest

from brownout.invariants.pii_patterns import default_detectors, find_all, iban_valid, luhn_valid
from tests.invariants.builders import Harness, llm

LEAKY = (
    "Contact jane.doe@corp.example or +44 20 7946 0958. Card 4111 1111 1111 1111, "
    "IBAN GB82 WEST 1234 5698 7654 32, key sk-proj-abcdefghijklmnopqrstuvwx123 and AKIAIOSFODNN7EXAMPLE.\n"
    "-----BEGIN RSA PRIVATE KEY-----\nMIIB...\n-----END RSA PRIVATE KEY-----"
)


def test_pii_leak_in_a_prompt_reports_kinds_and_offsets_never_values() -> None:
    h = Harness([{"type": "no_pii"}])
    found = h.run(llm(0, messages=[("system", "You are helpful."), ("user", LEAKY)]))
    kinds = {v.details["kind"] for v in found}
    assert kinds == {"email", "phone", "card", "iban", "openai_key", "aws_access_key", "private_key"}
    assert all(v.severity == "critical" and v.details["direction"] == "request" for v in found)
    email = next(v for v in found if v.details["kind"] == "email")
    assert email.message.startswith("email in request body at offset ")
    record = json.dumps([v.to_dict() for v in found])
    for secret in ("jane.doe", "4111", "7946", "GB82", "sk-proj", "AKIA", "MIIB"):
        assert secret not in record


def test_clean_prompt_and_lookalikes_pass() -> None:
    h = Harness([{"type": "no_pii"}])
    text = (
        "Order 4111111111111112 (fails Luhn), timestamp 1700000000000, version 1.2.3, "
        "GB00 WEST 1234 5698 7654 32 (bad checksum), sk-short, call me maybe"
    )
    assert h.run(llm(0, messages=[("user", text)])) == []


def test_direction_allowlist_and_extra_patterns() -> None:
    h = Harness(
        [
            {
                "type": "no_pii",
                "direction": "response",
                "allowlist": [r"@example\.com$"],
                "extra_patterns": {"employee_id": r"\bEMP-\d{6}\b"},
                "kinds": ["email"],
            }
        ]
    )
    assert h.run(llm(0, messages=[("user", "me@corp.example")], text="write to support@example.com")) == []
    (v,) = h.run(llm(1, text="Employee EMP-123456, +1 (555) 010-9999"))
    assert v.details["kind"] == "employee_id" and v.details["direction"] == "response"
    assert "response text at offset 9" in v.message
    (v,) = h.run(llm(2, calls=[("send", '{"to": "boss@corp.example"}')]))
    assert "response tool_calls[0].arguments" in v.message


def test_bad_regex_is_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"extra_patterns\.bad: invalid regex"):
        Harness([{"type": "no_pii", "extra_patterns": {"bad": "("}}])


def test_checksums() -> None:
    assert luhn_valid("4111 1111 1111 1111") and not luhn_valid("4111 1111 1111 1112")
    assert iban_valid("DE89 3704 0044 0532 0130 00") and not iban_valid("DE89 3704 0044 0532 0130 01")
    kinds = [
        f.kind
        for f in find_all(
            "sk-ant-api03-" + "x" * 30 + " ghp_" + "a" * 36 + " xoxb-12345-abcdefghij AIza" + "B" * 35,
            default_detectors(),
        )
    ]
    assert kinds == ["anthropic_key", "github_token", "slack_token", "google_api_key"]


def test_matches_followed_by_words_or_numbers_still_found() -> None:
    text = "iban GB82 WEST 1234 5698 7654 32 AND card 4111 1111 1111 1111 12/25, x1-555-010-99999"
    kinds = [f.kind for f in find_all(text, default_detectors())]
    assert kinds == ["card", "iban"]
    assert [f.kind for f in find_all("mail:a.b-c@x-y.example.org;", default_detectors())] == ["email"]
    assert list(find_all("user@localhost and @handle", default_detectors())) == []
