"""Shared fixtures: mock upstreams, a brownout proxy factory, and SDK clients routed through it.

Typical use:

    def test_x(upstream_tls, brownout_proxy, openai_client):
        proxy = brownout_proxy("seed: 1\\n", upstream=upstream_tls)
        client = openai_client(proxy, upstream_tls)
        client.chat.completions.create(model="gpt-4o-mini", messages=[...])
"""

from __future__ import annotations

import itertools
import shutil
import signal
import socket
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from brownout.proxy.certs import ensure_ca
from brownout.proxy.embed import ProxyHandle, running_proxy

# Hypothesis's timing checks judge the machine, not the code: on a loaded CI machine one draw can take a second
# (the process was not scheduled), which fails a property that holds. What the properties assert is unchanged.
settings.register_profile("brownout", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("brownout")

# The tests that press Ctrl-C (SIGINT to a brownout they started) need it to arrive as at a terminal. A job
# that a non-interactive shell starts in the background (`make test &`) ignores SIGINT, and an ignored signal
# stays ignored in every process it starts; a handled one is reset to the default there.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """What each rerun test failed with the first time (`make test` reruns a failure once): a flaky test's
    cause stays in the CI log, not only its name."""
    reruns = terminalreporter.stats.get("rerun", [])
    if reruns:
        terminalreporter.section("first failures of rerun tests")
        for report in reruns:
            terminalreporter.write_line(f"{report.nodeid} ({report.when}):")
            terminalreporter.write_line(str(report.longrepr)[-4000:])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding a `slow` test run first (in collection order otherwise): `make test` hands whole
    files to two workers, and a long file that starts last keeps one worker busy alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session", autouse=True)
def _throwaway_default_confdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Commands that fall back to the default CA directory (`brownout demo`, ...) get a fresh one per run
    (per worker process when tests run in parallel), never ~/.brownout: two processes creating the same
    CA at once could read each other's half-written key."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BROWNOUT_CONFDIR", str(tmp_path_factory.mktemp("default-confdir")))
        yield


@pytest.fixture(scope="session")
def _ca_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated CA per test session; each confdir gets a copy (RSA key generation costs ~0.3 s)."""
    return ensure_ca(tmp_path_factory.mktemp("ca-template")).confdir


@pytest.fixture
def confdir(tmp_path: Path, _ca_template: Path) -> Path:
    """A fresh brownout confdir for this test, CA and bundle included (never ~/.brownout)."""
    path = tmp_path / "confdir"
    shutil.copytree(_ca_template, path)
    path.chmod(0o700)
    return path


def _mock_upstream_class() -> Any:
    try:
        from brownout.proxy.demo.upstream import MockUpstream
    except ImportError as e:
        pytest.skip(f"brownout.proxy.demo.upstream is not importable yet: {e}")
    return MockUpstream


@pytest.fixture
def upstream() -> Iterator[Any]:
    """A plain-HTTP MockUpstream on 127.0.0.1 (`.url`, `.port`, `.requests_seen`)."""
    with _mock_upstream_class().run_in_thread(tls=False) as up:
        yield up


@pytest.fixture
def upstream_tls() -> Iterator[Any]:
    """A TLS MockUpstream with its own CA (`.ca_pem_path`); brownout_proxy(upstream=...) trusts it."""
    with _mock_upstream_class().run_in_thread(tls=True) as up:
        yield up


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something already listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def brownout_proxy(
    request: pytest.FixtureRequest, tmp_path: Path, _ca_template: Path
) -> Iterator[Callable[..., ProxyHandle]]:
    """Factory starting brownout proxies (stopped at teardown), each with its own confdir.

    At teardown, a proxy whose guard contained a failure fails the test: a component bug must
    not hide behind fail-open. Tests that cause failures on purpose carry
    `@pytest.mark.contained_errors`.

    `brownout_proxy(config=None, mode="regular", extra_options=None, *, upstream=None, on_exchange=None)`
    - `config`: YAML text, a path to a YAML file, or a `BrownoutConfig`; None = defaults. Text is
      written to a file first, so hot reload and error messages behave as with a real file.
    - `mode="reverse"` with `upstream=` means `reverse:<upstream.url>`; any mitmproxy mode string works.
    - `upstream=`: a MockUpstream; for a TLS one, the proxy trusts its CA (ssl_verify_upstream_trusted_ca).
    Returns the `proxy.embed.ProxyHandle` (.url, .port, .env, .ca_bundle_path, .addon, .master).
    """
    stack: list[Any] = []
    counter = itertools.count()

    def start(
        config: Any = None,
        mode: str = "regular",
        extra_options: dict[str, Any] | None = None,
        *,
        upstream: Any = None,
        on_exchange: Callable[[Any], None] | None = None,
    ) -> ProxyHandle:
        n = next(counter)
        confdir = tmp_path / f"proxy-confdir-{n}"
        shutil.copytree(_ca_template, confdir)
        options = dict(extra_options or {})
        # Ephemeral ports: tests never collide with a brownout (or each other) on 9464/9465.
        options.setdefault("brownout_metrics_listen", "127.0.0.1:0")
        options.setdefault("brownout_control_listen", "127.0.0.1:0")
        if upstream is not None and getattr(upstream, "ca_pem_path", None):
            options.setdefault("ssl_verify_upstream_trusted_ca", upstream.ca_pem_path)
        if mode == "reverse":
            if upstream is None:
                raise ValueError('mode="reverse" needs upstream=')
            mode = f"reverse:{upstream.url}"
        kwargs: dict[str, Any] = {}
        if isinstance(config, Path) or (isinstance(config, str) and "\n" not in config and Path(config).is_file()):
            kwargs["config_path"] = config
        elif isinstance(config, str):
            path = tmp_path / f"chaos-{n}.yaml"
            path.write_text(config, encoding="utf-8")
            kwargs["config_path"] = path
        elif config is not None:
            kwargs["config"] = config
        cm = running_proxy(mode=mode, confdir=confdir, extra_options=options, on_exchange=on_exchange, **kwargs)
        handle = cm.__enter__()
        stack.append((cm, handle))
        return handle

    yield start
    contained = {}
    for cm, handle in reversed(stack):
        contained.update(handle.addon.guard.snapshot())
        cm.__exit__(None, None, None)
    if contained and request.node.get_closest_marker("contained_errors") is None:
        pytest.fail(f"brownout contained component failures during the test: {contained}", pytrace=False)


def _proxied_http_client(proxy: ProxyHandle, module: Any, session: str | None = None) -> Any:
    verify = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
    return module.DefaultHttpxClient(proxy=proxy.proxy_url(session), verify=verify)


@pytest.fixture
def openai_client() -> Callable[..., Any]:
    """Factory: `openai_client(proxy, upstream_or_base_url, session=None, **kwargs) -> openai.OpenAI`.

    Regular-mode proxies are used as HTTP proxy with brownout's bundle; for a reverse-mode proxy pass
    `proxy.url` as the base URL and None as proxy. SDK retries are off unless `max_retries=` is given.
    """
    import openai

    def make(proxy: ProxyHandle | None, target: Any, session: str | None = None, **kwargs: Any) -> openai.OpenAI:
        base = target if isinstance(target, str) else target.url
        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("api_key", "sk-test")
        if proxy is not None:
            kwargs.setdefault("http_client", _proxied_http_client(proxy, openai, session))
        return openai.OpenAI(base_url=f"{base.rstrip('/')}/v1", **kwargs)

    return make


@pytest.fixture
def anthropic_client() -> Callable[..., Any]:
    """Factory: `anthropic_client(proxy, upstream_or_base_url, session=None, **kwargs) -> anthropic.Anthropic`."""
    import anthropic

    def make(proxy: ProxyHandle | None, target: Any, session: str | None = None, **kwargs: Any) -> anthropic.Anthropic:
        base = target if isinstance(target, str) else target.url
        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("api_key", "sk-ant-test")
        if proxy is not None:
            kwargs.setdefault("http_client", _proxied_http_client(proxy, anthropic, session))
        return anthropic.Anthropic(base_url=base.rstrip("/"), **kwargs)

    return make
