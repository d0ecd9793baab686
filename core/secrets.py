"""What counts as a credential on the wire, and how brownout blanks one wherever it keeps traffic.

The one place brownout recognises secrets: header names, query parameters, JSON body fields, API keys
of known formats (which the `no_pii` invariant reports, from the same list) and secrets inside URL
paths (`brownout.core.secret_paths`). The exchange, spans, logs, cassettes and metric labels all go
through these functions, so recording and replay blank alike, and blanking is stable: a redacted
text redacted again is unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from brownout.core.detectors import Detector, find_all

__all__ = [
    "KEY_FORMATS",
    "MARK",
    "SECRET_FIELDS",
    "SECRET_HEADERS",
    "SECRET_PARAMS",
    "KeyFormat",
    "SecretHeaders",
    "blank",
    "is_secret_header",
    "is_secret_param",
    "key_detectors",
    "redact_keys",
    "redact_query",
    "redact_text",
]

MARK = "REDACTED"

# Never copied into the exchange: they would otherwise reach spans, logs, reports and cassettes.
# Any other name that says it holds a credential is left out too (see is_secret_header).
SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "set-cookie", "proxy-authorization"}
)
# Query parameters whose values are credentials (Gemini's `key`, signed URLs' `sig`, OAuth's
# `code` and tokens, S3 and GCS presigned URLs), blanked wherever a URL is kept. Compared case-insensitively.
SECRET_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "api-key",
        "token",
        "access_token",
        "id_token",
        "refresh_token",
        "auth",
        "auth_token",
        "api_token",
        "session_token",
        "private_token",
        "code",
        "secret",
        "client_secret",
        "client_assertion",
        "password",
        "sig",
        "signature",
        "oauth_signature",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "x-goog-signature",
        "x-goog-credential",
    }
)
# JSON body fields whose values are credentials: the query names without the generic ones (a tool's
# `code`, a pagination `token`, a map's `key` are data). Compared case-insensitively.
SECRET_FIELDS = frozenset(
    {"api_key", "apikey", "api-key", "access_token", "id_token", "refresh_token", "client_secret", "password", "secret"}
)
_SECRET_QUERY = re.compile(rf"(?i)(?<=[?&])({'|'.join(map(re.escape, sorted(SECRET_PARAMS)))})=[^&#]*")


@dataclass(frozen=True, slots=True)
class KeyFormat:
    """One format of API key or token: its kind (as no_pii reports it), telltale literals, and regex."""

    kind: str
    literals: tuple[str, ...]
    regex: str


# API keys and tokens of known formats, most specific first (a later overlapping match is dropped).
# Each regex starts with a literal so the engine can skip ahead; word boundaries are checked apart.
# `literals`: one of them is in every match, a test far cheaper than the regex (most texts hold none).
KEY_FORMATS: tuple[KeyFormat, ...] = (
    KeyFormat("anthropic_key", ("sk-ant-",), r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    KeyFormat("openai_key", ("sk-",), r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    KeyFormat("stripe_key", ("k_live_", "k_test_"), r"[sr]k_(?:live|test)_[A-Za-z0-9]{20,}"),
    KeyFormat("aws_access_key", ("AKIA", "ASIA"), r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    KeyFormat(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    KeyFormat("gitlab_token", ("glpat-",), r"glpat-[A-Za-z0-9_\-]{20,}"),
    KeyFormat("huggingface_token", ("hf_",), r"hf_[A-Za-z0-9]{30,}"),
    KeyFormat(
        "slack_webhook",
        ("hooks.slack.com/",),
        r"hooks\.slack\.com/(?:services|triggers|workflows)/T[A-Z0-9]+/[A-Za-z0-9/]+",
    ),
    KeyFormat("slack_token", ("xox",), r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    KeyFormat("discord_webhook", ("/webhooks/",), r"discord(?:app)?\.com/api(?:/v\d+)?/webhooks/\d+/[A-Za-z0-9_\-]+"),
    KeyFormat("telegram_bot_token", (":AA",), r"(?:bot)?\d{6,12}:AA[A-Za-z0-9_\-]{30,}"),
    KeyFormat("google_api_key", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}"),
    KeyFormat("jwt", ("eyJ",), r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"),
    # The whole block when its end is there (never across a JSON string's quote), else the header line.
    KeyFormat(
        "private_key",
        ("PRIVATE KEY-----",),
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[^\"]{0,16384}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----)?",
    ),
)
_KEY_DETECTORS = tuple(Detector(f.kind, "secret", re.compile(f.regex), literals=f.literals) for f in KEY_FORMATS)
_ALL_LITERALS = tuple(x for f in KEY_FORMATS for x in f.literals)
# The shortest text any key format can match: shorter texts are skipped without a scan.
_KEY_MIN_CHARS = 15
_FIELD_HINTS = tuple(f'"{name}"' for name in SECRET_FIELDS)

# A header name says it holds a credential when one of its words ends so (x-auth-token, x-api-token,
# x-vault-token, ocp-apim-subscription-key, x-client-secret, x-oauth-...); plural counters such as
# x-ratelimit-remaining-tokens do not. These few are nonces or idempotency keys, not credentials.
_HEADER_WORD = re.compile(r"(?:token|key|secret|auth|authorization|password|passwd|credentials?|signature|cookie)$")
_HEADER_SPLIT = re.compile(r"[-_.]")
_NOT_CREDENTIALS = frozenset({"idempotency-key", "x-idempotency-key", "sec-websocket-key"})
_MAX_VERDICTS = 4096


def key_detectors() -> tuple[Detector, ...]:
    """The API-key detectors (category `secret`), shared with the no_pii invariant."""
    return _KEY_DETECTORS


def is_secret_param(name: str) -> bool:
    return name.lower() in SECRET_PARAMS


def redact_query(path: str) -> str:
    """Blank the values of secret-looking query parameters (`?key=...` becomes `?key=REDACTED`)."""
    if "?" not in path:
        return path
    return _SECRET_QUERY.sub(lambda m: f"{m.group(1)}={MARK}", path)


def _names_a_credential(name: str) -> bool:
    if name in SECRET_HEADERS:
        return True
    if name in _NOT_CREDENTIALS:
        return False
    return any(_HEADER_WORD.search(word) for word in _HEADER_SPLIT.split(name))


def is_secret_header(name: str) -> bool:
    """Whether a header (any case) carries a credential: the built-in list, or a name that says so."""
    return _names_a_credential(name.lower())


class SecretHeaders:
    """The header names never kept: `is_secret_header`'s, plus a configured list (`proxy.secret_headers`).

    Verdicts are remembered per name (boundedly: a client can make up names), so filtering a request's
    headers costs a dict lookup per header."""

    __slots__ = ("_verdicts", "extra")

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.extra = frozenset(name.strip().lower() for name in extra)
        self._verdicts: dict[str, bool] = {}

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        verdict = self._verdicts.get(name)
        if verdict is None:
            lowered = name.lower()
            verdict = lowered in self.extra or _names_a_credential(lowered)
            if len(self._verdicts) < _MAX_VERDICTS:
                self._verdicts[name] = verdict
        return verdict

    def without(self, headers: Mapping[str, str]) -> dict[str, str]:
        """`headers` without the secret ones."""
        known = self._verdicts.get
        return {k: v for k, v in headers.items() if not (known(k) or (known(k) is None and k in self))}

    def kept(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """The pairs whose names are not secret, in order."""
        return [(k, v) for k, v in headers if k not in self]


def redact_keys(text: str) -> str:
    """`text` with API keys of known formats replaced by REDACTED; the same object when there are none."""
    if len(text) < _KEY_MIN_CHARS or not _any_literal(text):
        return text
    return blank(text, _KEY_DETECTORS)[0]  # each detector runs only if its literals are in the text


def blank(text: str, detectors: Iterable[Detector]) -> tuple[str, int]:
    """`text` with what the detectors find replaced by REDACTED, and how many they found (the same
    object when none)."""
    findings = sorted(find_all(text, detectors), key=lambda f: f.start, reverse=True)
    for f in findings:
        text = text[: f.start] + MARK + text[f.end :]
    return text, len(findings)


def _any_literal(text: str) -> bool:
    # `in` runs in C; an alternation regex over the same literals, or any() over a generator, costs more.
    for literal in _ALL_LITERALS:  # noqa: SIM110
        if literal in text:
            return True
    return False


def redact_text(text: str) -> str:
    """Text as brownout keeps it (cassette bodies, span content): the string values of a JSON document's
    credential fields (`api_key`, `password`, ..., at any depth) and API keys of known formats become
    REDACTED. The same object when there are none."""
    lowered = text.lower()
    if any(hint in lowered for hint in _FIELD_HINTS):
        try:
            doc = json.loads(text)
            if _blank_fields(doc):
                text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        except (ValueError, RecursionError):  # not JSON, or nested too deep to walk: the patterns still apply
            pass
    return redact_keys(text)


def _blank_fields(node: object) -> bool:
    """Blank credential fields' string values in place, at any depth; whether any was."""
    found = False
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(k, str) and k.lower() in SECRET_FIELDS and isinstance(v, str) and v != MARK:
                node[k] = MARK
                found = True
            else:
                found = _blank_fields(v) or found
    elif isinstance(node, list):
        for item in node:
            found = _blank_fields(item) or found
    return found
