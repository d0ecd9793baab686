"""mitmproxy's check of each message's field types, kept exactly, without its reference cycles.

mitmproxy's own check raises and catches a TypeError for each union member a value is not; each one
is a cycle that holds the frames of the layer stack until the cyclic collector runs
(proxy/messagecheck.py).
"""

from __future__ import annotations

import asyncio
import gc
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from mitmproxy import http, options

from brownout.proxy import messagecheck
from brownout.proxy.master import BrownoutMaster

pytestmark = pytest.mark.skipif(messagecheck._ORIGINAL is None, reason="mitmproxy defines no check under python -O")

ORIGINAL: Callable[[Any], None] = messagecheck._ORIGINAL  # type: ignore[assignment]
VALUES: list[Any] = [None, b"x", "x", 0, 7, 1.5, True, http.Headers(), object(), [b"a"], (b"a",)]


@pytest.fixture
def original_check() -> Iterator[None]:
    before = http.MessageData.__post_init__  # type: ignore[attr-defined]
    http.MessageData.__post_init__ = ORIGINAL  # type: ignore[attr-defined]
    yield
    http.MessageData.__post_init__ = before  # type: ignore[attr-defined]


def _outcome(check: Callable[[Any], None], data: Any) -> str | None:
    try:
        check(data)
    except TypeError as e:
        return str(e)
    return None


@pytest.mark.parametrize(
    "make", [lambda: http.Request.make("GET", "http://h/p").data, lambda: http.Response.make(200).data]
)
def test_each_field_accepts_and_rejects_what_mitmproxy_does_with_its_own_error(make: Callable[[], Any]) -> None:
    data = make()
    rejected = 0
    for field in data.__dataclass_fields__:
        kept = getattr(data, field)
        for value in VALUES:
            setattr(data, field, value)
            ours, theirs = _outcome(messagecheck._post_init, data), _outcome(ORIGINAL, data)
            assert ours == theirs, (field, value)
            rejected += theirs is not None
        setattr(data, field, kept)
    assert rejected > 50  # the values above do exercise mitmproxy's rejections


TYPING_UNION = typing.Optional[str]  # noqa: UP045 - typing.Union's origin, not types.UnionType's


@pytest.mark.parametrize(
    "typeinfo",
    [bytes, float, int, bool, bytes | None, float | None, TYPING_UNION, str | bytes | None, typing.Any,
     Sequence[str], tuple[int, int], typing.IO, typing.TextIO, Sequence[str] | None],
)  # fmt: skip
def test_accepted_types_match_check_option_type_where_it_answers(typeinfo: Any) -> None:
    from mitmproxy.utils.typecheck import check_option_type

    accepted = messagecheck.accepted_types(typeinfo)
    for value in VALUES:
        if accepted is not None and isinstance(value, accepted):
            check_option_type("f", value, typeinfo)  # anything accepted here must pass mitmproxy's check


def _cyclic_garbage(build: Callable[[], None]) -> int:
    gc.collect()
    gc.disable()
    try:
        build()
        return gc.collect()
    finally:
        gc.enable()


def _messages() -> None:
    for _ in range(50):
        http.Request.make("POST", "http://h/v1/chat/completions", b"{}")
        http.Response.make(200, b"{}", {"content-type": "application/json"})


def test_messages_leave_no_cyclic_garbage(original_check: None) -> None:
    assert _cyclic_garbage(_messages) > 2000  # mitmproxy's check: a TypeError, traceback and frame per raise
    messagecheck.install()
    assert _cyclic_garbage(_messages) == 0


def test_a_brownout_master_installs_it(original_check: None) -> None:
    assert not messagecheck.installed()

    async def build() -> None:
        BrownoutMaster(options.Options())

    asyncio.run(build())
    assert messagecheck.installed()
    messagecheck.install()  # idempotent
    assert messagecheck.installed()
