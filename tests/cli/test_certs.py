"""brownout's CA, trust bundle and proxy environment."""

from __future__ import annotations

import stat
from pathlib import Path

import certifi
import pytest

from brownout.proxy.certs import (
    BUNDLE_NAME,
    CA_CERT_NAME,
    default_confdir,
    ensure_ca,
    proxy_env,
    proxy_url,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_confdir_and_key_permissions(tmp_path: Path) -> None:
    files = ensure_ca(tmp_path / "fresh")
    assert _mode(files.confdir) == 0o700
    for key in ("mitmproxy-ca.pem", "mitmproxy-ca.p12"):
        assert _mode(files.confdir / key) == 0o600, key
    assert files.ca_cert.name == CA_CERT_NAME and files.bundle.name == BUNDLE_NAME


def test_loose_permissions_are_tightened(tmp_path: Path) -> None:
    files = ensure_ca(tmp_path / "c")
    files.confdir.chmod(0o755)
    (files.confdir / "mitmproxy-ca.pem").chmod(0o644)
    ensure_ca(files.confdir)
    assert _mode(files.confdir) == 0o700
    assert _mode(files.confdir / "mitmproxy-ca.pem") == 0o600


def test_bundle_has_certifi_roots_and_brownout_ca(confdir: Path) -> None:
    files = ensure_ca(confdir)
    bundle = files.bundle.read_text()
    ca = files.ca_cert.read_text().strip()
    assert bundle.rstrip().endswith(ca)
    certifi_first = certifi.contents().split("-----END CERTIFICATE-----")[0].split("-----BEGIN CERTIFICATE-----")[1]
    assert certifi_first.strip() in bundle
    assert bundle.count("BEGIN CERTIFICATE") >= certifi.contents().count("BEGIN CERTIFICATE") + 1


def test_ca_is_stable_across_calls(confdir: Path) -> None:
    first = ensure_ca(confdir).ca_cert.read_bytes()
    assert ensure_ca(confdir).ca_cert.read_bytes() == first


def test_default_confdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BROWNOUT_CONFDIR", str(tmp_path / "x"))
    assert default_confdir() == tmp_path / "x"
    monkeypatch.delenv("BROWNOUT_CONFDIR")
    assert default_confdir() == Path.home() / ".brownout"


def test_proxy_env(tmp_path: Path) -> None:
    bundle = tmp_path / BUNDLE_NAME
    env = proxy_env("127.0.0.1", 8080, bundle, session="run 17")
    url = "http://run%2017@127.0.0.1:8080"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert env[name] == url
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_CA_BUNDLE"):
        assert env[name] == str(bundle)
    assert env["NODE_EXTRA_CA_CERTS"] == str(tmp_path / CA_CERT_NAME)
    assert env["NODE_USE_ENV_PROXY"] == "1"
    # loopback is proxied too: an agent's local tools are traffic brownout must see
    assert env["NO_PROXY"] == env["no_proxy"] == ""
    assert proxy_env("::", 1, bundle, no_proxy=["internal.example"])["NO_PROXY"] == "internal.example"


@pytest.mark.parametrize(
    ("host", "expected"),
    [("0.0.0.0", "http://127.0.0.1:9"), ("::", "http://[::1]:9"), ("::1", "http://[::1]:9"), ("h", "http://h:9")],
)
def test_proxy_url_dials_loopback_for_wildcards(host: str, expected: str) -> None:
    assert proxy_url(host, 9) == expected
