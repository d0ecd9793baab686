"""brownout's CA, the combined trust bundle, and the environment that points a client at the proxy.

The CA is mitmproxy's, generated in brownout's own confdir (default `~/.brownout`, or
`$BROWNOUT_CONFDIR`), so brownout never touches a user's `~/.mitmproxy`.

`SSL_CERT_FILE` *replaces* a client's trust store, so clients get a bundle of the usual roots plus
brownout's CA. "The usual roots" differ by client: httpx, requests and the openai/anthropic SDKs
default to certifi; curl and OpenSSL default to the system store. The bundle is their union
(deduplicated), so no client loses a root it trusted before.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import certifi

__all__ = [
    "BUNDLE_NAME",
    "CA_CERT_NAME",
    "CAFiles",
    "connect_host",
    "default_confdir",
    "ensure_ca",
    "proxy_env",
    "proxy_url",
]

logger = logging.getLogger(__name__)

CA_BASENAME = "mitmproxy"  # mitmproxy's tlsconfig addon looks for exactly this name in confdir
CA_CERT_NAME = f"{CA_BASENAME}-ca-cert.pem"
BUNDLE_NAME = "brownout-ca-bundle.pem"
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")
# files holding the CA's private key
_SECRET_FILES = (f"{CA_BASENAME}-ca.pem", f"{CA_BASENAME}-ca.p12")
_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.+?-----END CERTIFICATE-----", re.DOTALL)


@dataclass(frozen=True)
class CAFiles:
    """Where brownout's CA material lives."""

    confdir: Path
    ca_cert: Path  # brownout's CA certificate alone (for NODE_EXTRA_CA_CERTS, browsers, OS stores)
    bundle: Path  # usual roots + brownout's CA (for SSL_CERT_FILE and friends)


def default_confdir() -> Path:
    """`$BROWNOUT_CONFDIR`, else `~/.brownout`."""
    return Path(os.environ.get("BROWNOUT_CONFDIR") or "~/.brownout").expanduser()


def ensure_ca(confdir: str | os.PathLike[str] | None = None) -> CAFiles:
    """Create the confdir (0700), the CA (keys 0600) and the trust bundle if missing; return their paths."""
    root = Path(confdir).expanduser() if confdir is not None else default_confdir()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    _chmod(root, 0o700)
    from mitmproxy.certs import CertStore  # late: `brownout --help` should not pay for cryptography

    CertStore.from_store(root, CA_BASENAME, 2048)
    for name in _SECRET_FILES:
        if (root / name).exists():
            _chmod(root / name, 0o600)
    ca_cert = root / CA_CERT_NAME
    bundle = root / BUNDLE_NAME
    content = _bundle_bytes(ca_cert.read_bytes())
    if not bundle.exists() or bundle.read_bytes() != content:
        _write_atomic(bundle, content)
        logger.debug("wrote CA bundle %s", bundle)
    return CAFiles(confdir=root, ca_cert=ca_cert, bundle=bundle)


def connect_host(listen_host: str) -> str:
    """The address a local client dials for a proxy listening on `listen_host` (wildcards -> loopback)."""
    if listen_host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if listen_host == "::":
        return "::1"
    return listen_host


def proxy_url(host: str, port: int, session: str | None = None) -> str:
    """`http://[session@]host:port`; the username is how brownout tells agents apart (Proxy-Authorization)."""
    host = connect_host(host)
    hostpart = f"[{host}]" if ":" in host else host
    user = f"{quote(session, safe='')}@" if session else ""
    return f"http://{user}{hostpart}:{port}"


def proxy_env(
    host: str,
    port: int,
    bundle_path: str | os.PathLike[str],
    session: str | None = None,
    *,
    ca_cert_path: str | os.PathLike[str] | None = None,
    no_proxy: Sequence[str] = (),
) -> dict[str, str]:
    """Environment variables that send a client's HTTP(S) traffic through brownout and make it trust brownout's CA.

    NO_PROXY is set, and empty by default, on purpose: an inherited `NO_PROXY=localhost,127.0.0.1`
    (common in CI and containers) would let an agent's local tools and mock servers bypass the
    proxy, and those are traffic brownout should see. Pass `no_proxy` for hosts that must bypass.
    Note Go's net/http never proxies loopback addresses whatever the environment says.
    """
    url = proxy_url(host, port, session)
    bundle = str(Path(bundle_path).resolve())
    ca = str(Path(ca_cert_path).resolve()) if ca_cert_path else str(Path(bundle).parent / CA_CERT_NAME)
    bypass = ",".join(no_proxy)
    return {
        # curl ignores upper-case HTTP_PROXY (a CGI hazard), so set both spellings
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": bypass,
        "no_proxy": bypass,
        "SSL_CERT_FILE": bundle,  # OpenSSL, httpx, openai/anthropic SDKs
        "REQUESTS_CA_BUNDLE": bundle,  # requests
        "CURL_CA_BUNDLE": bundle,  # curl
        "AWS_CA_BUNDLE": bundle,  # boto3 / botocore (Bedrock agents), the AWS CLI
        "NODE_EXTRA_CA_CERTS": ca,  # Node adds these to its built-in roots
        "NODE_USE_ENV_PROXY": "1",  # Node >= 24 ignores HTTP(S)_PROXY without it
    }


def _bundle_bytes(ca_pem: bytes) -> bytes:
    parts: list[bytes] = []
    seen: set[bytes] = set()
    sources = [Path(certifi.where())] + [Path(p) for p in SYSTEM_BUNDLES if Path(p).is_file()]
    for src in sources[:2]:  # certifi + the first system bundle found; the others are aliases
        try:
            data = src.read_bytes()
        except OSError as e:
            logger.warning("skipping CA bundle %s: %s", src, e)
            continue
        for m in _PEM_CERT.finditer(data):
            key = b"".join(m.group(0).split())
            if key not in seen:
                seen.add(key)
                parts.append(m.group(0).replace(b"\r\n", b"\n"))
    header = b"# brownout trust bundle: certifi roots + system roots + brownout's CA (last)\n"
    return header + b"\n".join(parts) + b"\n# brownout CA\n" + ca_pem.strip() + b"\n"


def _write_atomic(path: Path, content: bytes) -> None:
    # a concurrent `brownout env` must never see a half-written bundle
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _chmod(path: Path, mode: int) -> None:
    try:
        if path.stat().st_mode & 0o777 != mode:
            os.chmod(path, mode)
    except PermissionError:
        # not ours (e.g. a shared confdir): keep going, but say so
        logger.warning("cannot set mode %o on %s", mode, path)
