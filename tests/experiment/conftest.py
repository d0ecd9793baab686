"""Fixtures for the experiment tests: a demo upstream, a CA dir, and a builder of fake results."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
HAS_EMBED = importlib.util.find_spec("brownout.proxy.embed") is not None
needs_proxy = pytest.mark.skipif(not HAS_EMBED, reason="brownout.proxy.embed (the embedded proxy) is not available yet")


@pytest.fixture(scope="session")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("brownout-conf"))


@pytest.fixture(scope="session")
def upstream_url() -> Iterator[str]:
    from brownout.proxy.demo.upstream import MockUpstream

    with MockUpstream.run_in_thread(record=False) as up:
        yield up.url


@pytest.fixture
def demo_env(upstream_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DEMO_UPSTREAM", upstream_url)
    return upstream_url
