"""Helpers for record/replay tests: proxies that record or replay, waiting for the cassette writer."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from brownout.proxy.embed import ProxyHandle
from brownout.proxy.record.cassette import Cassette, Recorded, header, read_dir


def recorder(
    brownout_proxy: Callable[..., ProxyHandle], cassettes: Path, config: str = "seed: 1\n", **kwargs: Any
) -> ProxyHandle:
    """A proxy recording into `cassettes`."""
    options = {"brownout_record": str(cassettes), **kwargs.pop("extra_options", {})}
    return brownout_proxy(config, extra_options=options, **kwargs)


def player(
    brownout_proxy: Callable[..., ProxyHandle],
    cassettes: Path,
    config: str = "seed: 1\n",
    *,
    speed: float | None = None,
    miss: str | None = None,
    **kwargs: Any,
) -> ProxyHandle:
    """A proxy replaying from `cassettes`."""
    options = {"brownout_replay": str(cassettes), **kwargs.pop("extra_options", {})}
    if speed is not None:
        options["brownout_replay_speed"] = repr(speed)
    if miss is not None:
        options["brownout_replay_miss"] = miss
    return brownout_proxy(config, extra_options=options, **kwargs)


def wait_recorded(proxy: ProxyHandle, n: int, timeout_s: float = 10.0) -> None:
    """Until `n` exchanges are written (the exchange finishes just after the client has its answer)."""
    writer = proxy.addon.tape.writer
    assert writer is not None, "the proxy is not recording"
    deadline = time.monotonic() + timeout_s
    while writer.written < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.written >= n, f"{writer.written} exchanges recorded, expected {n} (dropped {writer.dropped})"
    assert writer.flush(timeout_s)


def load(cassettes: Path) -> list[Cassette]:
    return list(read_dir(cassettes))


@contextmanager
def mock_upstream(tls: bool = False) -> Iterator[Any]:
    """A demo MockUpstream that is gone after the block: replay must not need it."""
    from brownout.proxy.demo.upstream import MockUpstream

    with MockUpstream.run_in_thread(tls=tls) as up:
        yield up


def wait_exchanges(exchanges: list[Any], n: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(exchanges) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(exchanges) >= n, f"{len(exchanges)} exchanges finished, expected {n}"


def chat(session: str, n: int = 1, *, content: str = "hello", **kw: object) -> Recorded:
    """The n-th OpenAI chat exchange of a session (question n, answered with `content`), as recorded."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"question {n}"}]}
    answer = {"id": f"c{n}", "object": "chat.completion", "model": "gpt-4o", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    ]}  # fmt: skip
    return Recorded(
        session=session,
        seq=n,
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("content-type", "application/json")],
        request_body=json.dumps(body).encode(),
        status=200,
        reason="OK",
        response_headers=[("content-type", "application/json")],
        body=json.dumps(answer).encode(),
        **{"end_s": 0.1, **kw},  # type: ignore[arg-type]
    )


def write_cassette(path: Path, lines: Iterable[dict[str, Any]]) -> Path:
    """A cassette file of session `path.stem` holding these exchange lines, as written (nothing checked)."""
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps(header(path.stem, "2026-01-01T00:00:00+00:00", "test")) + "\n")
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return path
