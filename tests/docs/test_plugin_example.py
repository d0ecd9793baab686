"""The plugin example in docs/plugins.md works as written, through the real proxy.

The page's Python block becomes `acme_brownout.py` on sys.path and its YAML block the config: the
plugin fault answers a tool API call, and the plugin invariant flags a model outside its allowlist.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.docs.mdpages import DOCS, page

DOC = page(DOCS / "plugins.md")
SPEC = "acme_brownout:plugin"


@pytest.fixture
def acme_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (source,) = DOC.code_under("Example", "python")
    (tmp_path / "acme_brownout.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("acme_brownout", None)  # plugins register nothing process-wide: only the import to forget


def test_the_documented_plugin_runs_through_the_proxy(
    acme_plugin: None, tmp_path: Path, upstream, brownout_proxy, openai_client
) -> None:
    config = yaml.safe_load(DOC.code_under("Plugins", "yaml")[0])
    assert config["plugins"] == [SPEC]
    violations = tmp_path / "violations.jsonl"
    config["exporters"] = {"jsonl": {"path": str(violations)}}
    # Exporters run before listeners: once the chat exchange is seen, its violations are written.
    chat_done = threading.Event()
    seen = lambda exchange: exchange.provider == "openai" and chat_done.set()
    proxy = brownout_proxy(yaml.safe_dump(config), upstream=upstream, on_exchange=seen)

    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        answer = client.get(f"{upstream.url}/tools/weather?city=Paris")
    assert answer.status_code == 503
    assert answer.json() == {"gateway": "unavailable", "retry": True}
    assert not any(seen.path.startswith("/tools/") for seen in upstream.requests_seen)

    openai_client(proxy, upstream).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    assert chat_done.wait(10)
    assert proxy.addon.pipeline.exporters.flush_logs()  # JSONL is written by its own thread
    records = [json.loads(line) for line in violations.read_text(encoding="utf-8").splitlines()]
    assert [(r["invariant"], r["model"]) for r in records] == [("acme_model_allowlist", "gpt-4o-mini")]
