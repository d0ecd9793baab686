"""One list of credential query parameters serves the exchange, the span's url.full and cassettes."""

from __future__ import annotations

import pytest

from brownout.core.secrets import SECRET_PARAMS, redact_query
from brownout.core.span_attributes import redact_url


@pytest.mark.parametrize("name", sorted(SECRET_PARAMS))
def test_every_secret_parameter_is_blanked_in_paths_and_span_urls(name: str) -> None:
    path = f"/v1/x?model=m&{name}=s3cr3t&stream=true"
    assert redact_query(path) == f"/v1/x?model=m&{name}=REDACTED&stream=true"
    assert "s3cr3t" not in redact_url("https", "api.example.com", 443, path)


def test_names_match_whatever_their_case_and_others_stay() -> None:
    presigned = "/bucket/o?X-Amz-Credential=AKIA&X-Amz-Signature=abc&X-Amz-Expires=60&keyword=cats"
    assert redact_query(presigned) == (
        "/bucket/o?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Expires=60&keyword=cats"
    )
    url = redact_url("https", "s3.example.com", 443, presigned)
    assert "AKIA" not in url and "abc" not in url and "X-Amz-Expires=60" in url and "keyword=cats" in url
    assert redact_query("/oauth?client_secret=x&refresh_token=y&state=z") == (
        "/oauth?client_secret=REDACTED&refresh_token=REDACTED&state=z"
    )
