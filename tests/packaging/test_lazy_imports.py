"""A proxy loads only what its config uses: on the memory backend (the default) it never imports the Redis
client, which costs every start about 0.2 s; the redis backend still gets it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

REPORT = """
import sys
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.embed import running_proxy

with running_proxy(config=BrownoutConfig.model_validate(CONFIG), extra_options=OPTIONS) as proxy:
    pass
print(sorted({m.split(".")[0] for m in sys.modules} & {"redis", "hiredis"}))
"""
OPTIONS = ["brownout_metrics_listen=127.0.0.1:0", "brownout_control_listen=127.0.0.1:0"]


def _loaded(config: dict[str, object], confdir: str) -> str:
    script = f"CONFIG = {config!r}\nOPTIONS = {OPTIONS!r}\n" + textwrap.dedent(REPORT)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"BROWNOUT_CONFDIR": confdir, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (None, "[]"),
        ({"backend": "memory"}, "[]"),
        # Nothing listens there: the proxy starts anyway (the store is away), with the client loaded.
        ({"backend": "redis", "url": "redis://127.0.0.1:9/0"}, "['hiredis', 'redis']"),
    ],
)
def test_the_redis_client_loads_only_with_the_redis_backend(
    state: dict[str, str] | None, expected: str, confdir: str
) -> None:
    config: dict[str, object] = {"version": 1}
    if state is not None:
        config["state"] = state
    assert _loaded(config, confdir) == expected
