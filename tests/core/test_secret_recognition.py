"""What brownout takes for a secret, and what it must not: URL paths and queries, header names, text.

Both ways: every secret layout is blanked (and the URL stays readable), and the ids and model names
that fill real API paths are kept, so logs and replay matching still tell requests apart.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from brownout.core.secret_paths import redact_target, redact_url
from brownout.core.secrets import SecretHeaders, is_secret_header, redact_keys, redact_text
from brownout.invariants.pii_patterns import default_detectors, find_all

SLACK = "abcdEFGHijklMNOPqrstUVWX"
TELEGRAM = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


@pytest.mark.parametrize(
    ("target", "kept"),
    [
        (f"/services/T0123ABCD/B0456EFGH/{SLACK}", "/services/T0123ABCD/B0456EFGH/REDACTED"),
        ("/workflows/T0123ABCD/A0456EFGH/123456789/abcdef", "/workflows/T0123ABCD/A0456EFGH/123456789/REDACTED"),
        ("/triggers/T0123ABCD/1234567890/0123456789abcdef", "/triggers/T0123ABCD/1234567890/REDACTED"),
        ("/api/webhooks/123456789012345678/AbC-dEf_gh", "/api/webhooks/123456789012345678/REDACTED"),
        ("/api/v10/webhooks/1234/tok?wait=true", "/api/v10/webhooks/1234/REDACTED?wait=true"),
        (f"/bot{TELEGRAM}/sendMessage", "/botREDACTED/sendMessage"),
        (f"/file/bot{TELEGRAM}/photos/file_1.jpg", "/file/botREDACTED/photos/file_1.jpg"),
        (
            "/webhookb2/a@b/IncomingWebhook/0123456789abcdef0123456789abcdef/1111-2222",
            "/webhookb2/a@b/IncomingWebhook/REDACTED/REDACTED",
        ),
        ("/hooks/catch/123456/abc1x9/", "/hooks/catch/123456/REDACTED/"),
        ("/webhook/550e8400-e29b-41d4-a716-446655440000", "/webhook/REDACTED"),
        ("/v1/sk-proj-abcdefghijklmnopqrstuvwxyz0123/models", "/v1/REDACTED/models"),
        ("/check/sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "/check/REDACTED"),
        ("/u/ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "/u/REDACTED"),
        ("/t/xoxb-1234567890-abcdefghij", "/t/REDACTED"),
        ("/keys/AKIAIOSFODNN7EXAMPLE/info", "/keys/REDACTED/info"),
        ("/dl/0123456789abcdef0123456789abcdef", "/dl/REDACTED"),  # 32 hex digits
        ("/download/xq9bk4t7j3fb8r1mzkx6yhc2ow", "/download/REDACTED"),  # lower case and digits
        ("/s/Zm9vYmFyYmF6cXV4cXV1eGNvcmdl", "/s/REDACTED"),  # base64 without digits: the case switches
        ("/d/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P", "/d/REDACTED"),
        ("/search?q=sk-proj-abcdefghijklmnopqrstuvwxyz0123&page=2", "/search?q=REDACTED&page=2"),
        (
            "/o?X-Goog-Signature=abc&X-Goog-Credential=sa%40p&alt=media",
            "/o?X-Goog-Signature=REDACTED&X-Goog-Credential=REDACTED&alt=media",
        ),
        ("/blob?sv=2024&sig=abc%2Bdef&se=2030", "/blob?sv=2024&sig=REDACTED&se=2030"),  # Azure SAS
    ],
)
def test_secrets_in_a_path_or_query_are_blanked_and_the_rest_stays_readable(target: str, kept: str) -> None:
    assert redact_target(target) == kept
    assert redact_target(kept) == kept  # stable: a recording and the live request blank alike


@pytest.mark.parametrize(
    "target",
    [
        "/v1/chat/completions",
        "/v1/responses/resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
        "/v1/files/file-BK7bzQj3FfZFXr7DbL6xJwfo/content",
        "/v1/messages/batches/msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d",
        "/v1/chat/completions/chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "/v1/models/gpt-4o-2024-08-06",
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
        "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse-stream",
        "/models/meta-llama/Llama-3.1-8B-Instruct",
        "/models/DeepSeek-R1-Distill-Qwen-32B/anthropic-claude-3-haiku-20240307-v1",
        "/models/TheBloke/Mistral7BInstructV02-GPTQ/Qwen2-VL-72B-Instruct-GPTQ-Int4-AWQ",
        "/models/Mistral-Small-24B-Instruct-2501-FP8/QwQ-32B-Preview-GGUF-Q4_K_M-imatrix",
        "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-06-01",
        "/items/550e8400-e29b-41d4-a716-446655440000",  # a UUID is an id
        "/items/507f1f77bcf86cd799439011",  # an ObjectId
        "/api/v1/users/12345678901234567890/posts?page=2",
        "/v1/getUser2FactorAuthentication/SomeVeryLongCamelCaseName/parseHTMLToJSONString",
        "/tools/weather?city=Paris&units=metric",
        "/api/webhooks/list",  # not a Discord webhook: no id and token
        "/bots/list",
    ],
)
def test_ids_and_model_names_are_not_secrets(target: str) -> None:
    assert redact_target(target) == target


def test_random_tokens_are_blanked_whatever_their_alphabet() -> None:
    rng = random.Random(7)  # seeded: the same tokens every run
    base62 = string.ascii_letters + string.digits
    urlsafe = base62 + "-_"
    tokens = ["".join(rng.choice(base62) for _ in range(24)) for _ in range(300)]
    tokens += ["".join(rng.choice(urlsafe) for _ in range(43)) for _ in range(300)]
    missed = [t for t in tokens if redact_target(f"/hooks/x/{t}") != "/hooks/x/REDACTED"]
    assert len(missed) <= 6, missed  # 1 in 100: words by chance, or a prefixed id's shape (`ab-...`)


def test_full_urls_keep_scheme_host_and_port() -> None:
    for host in ("discord.com", "discordapp.com"):
        assert redact_url(f"https://{host}/api/webhooks/12/s3cr3t-T0ken") == f"https://{host}/api/webhooks/12/REDACTED"
    assert redact_url("http://127.0.0.1:8080/services/T1/B2/xyz?key=k") == (
        "http://127.0.0.1:8080/services/T1/B2/REDACTED?key=REDACTED"
    )
    assert redact_url("https://api.telegram.org?x=1") == "https://api.telegram.org?x=1"


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "x-api-key",
        "x-auth-token",
        "X-API-Token",
        "x-vault-token",
        "private-token",
        "x-csrftoken",
        "ocp-apim-subscription-key",
        "x-functions-key",
        "x-client-secret",
        "x-oauth-scopes",
        "x-auth",
        "x-hub-signature-256",
        "x-db-password",
        "x-amz-security-token",
    ],
)
def test_a_header_whose_name_says_credential_is_secret(name: str) -> None:
    assert is_secret_header(name)


@pytest.mark.parametrize(
    "name",
    [
        "content-type",
        "x-ratelimit-remaining-tokens",
        "anthropic-ratelimit-input-tokens-remaining",
        "idempotency-key",
        "sec-websocket-key",
        "www-authenticate",
        "x-brownout-session",
        "mcp-session-id",
        "keep-alive",
        "x-stainless-retry-count",
    ],
)
def test_headers_that_only_look_alike_are_kept(name: str) -> None:
    assert not is_secret_header(name)


def test_configured_header_names_join_the_built_in_ones() -> None:
    secret = SecretHeaders(["X-Tenant-Pass"])
    assert "x-tenant-pass" in secret and "X-TENANT-PASS" in secret and "x-auth-token" in secret
    assert "x-tenant-id" not in secret and "x-tenant-pass" not in SecretHeaders()
    assert secret.kept([("X-Tenant-Pass", "p"), ("Accept", "a"), ("x-api-token", "t")]) == [("Accept", "a")]


def test_text_loses_keys_of_known_formats_and_credential_fields() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----"
    text = (
        "keys: sk-proj-abcdefghijklmnopqrstuvwxyz0123, sk_live_abcdefghijklmnopqrstuvwx, hf_abcdefghijklmnopqrstuvwxyz0123, "
        "glpat-abcdefghijklmnopqrst, https://hooks.slack.com/services/T0123/B0456/abcdefghijkl and " + pem
    )
    out = redact_text(text)
    assert out.count("REDACTED") == 6 and "MIIB" not in out and "T0123" not in out
    doc = {"user": "ada", "auth": {"password": "hunter2", "client_secret": "cs"}, "token": "page-2"}
    blanked = json.loads(redact_text(json.dumps(doc)))
    assert blanked == {"user": "ada", "auth": {"password": "REDACTED", "client_secret": "REDACTED"}, "token": "page-2"}
    plain = "nothing to see here, no key at all"
    assert redact_text(plain) is plain and redact_keys(plain) is plain  # nothing found: the same object


def test_no_pii_finds_exactly_what_redaction_blanks() -> None:
    text = "a jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P and " + TELEGRAM
    kinds = [f.kind for f in find_all(text, [d for d in default_detectors() if d.category == "secret"])]
    assert kinds == ["telegram_bot_token", "jwt"]
    assert redact_keys(text) == "a jwt REDACTED and REDACTED"
