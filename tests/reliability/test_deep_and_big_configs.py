"""Deeply nested files and very large configs: a clear error naming the file, and traffic that never waits.

Nesting deeper than any config needs (in a config, an experiment, a cassette line, an exchanges log
line) is an error naming the file and line, never a RecursionError traceback, nor the crash that
PyYAML's libyaml composer meets a hundred thousand levels down; a hot reload that fails that way is
counted as rejected and keeps the last good config. A 10,000-rule config is parsed, validated and
compiled off the event loop and swapped in at once: a probe on the proxy's loop measures that it is
never held up for anything like the time compiling the rules takes.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from brownout.faults.engine import FaultEngine
from brownout.proxy.cli import main
from brownout.proxy.configload import ConfigError, load_config, parse_config
from brownout.proxy.record.cassette import CassetteError, header, read_cassette
from tests.reliability.rawupstream import RawUpstream, fixed, http_response

DEEP = {
    "flow-sequence": ("rules: " + "[" * 5000 + "]" * 5000 + "\n", 1),
    "flow-mapping": ("proxy: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", 1),
    "block": ("".join("  " * i + "a:\n" for i in range(3000)) + "  " * 3000 + "b\n", 101),
    # Where PyYAML's libyaml composer overflows the C stack and kills the process.
    "million": ("rules: " + "[" * 1_000_000 + "]" * 1_000_000 + "\n", 1),
    "in-a-rule": (
        "version: 1\nrules:\n  - name: r\n    match: {}\n    fault: {type: mutate, set: {x: "
        + "[" * 3000
        + "]" * 3000
        + "}}\n",
        5,
    ),
}


@pytest.mark.parametrize("case", list(DEEP))
def test_deep_nesting_in_a_config_is_an_error_naming_file_and_line(tmp_path: Path, case: str) -> None:
    text, line = DEEP[case]
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}:{line}: nested more than 100 levels deep; a config needs a few"
    assert time.monotonic() - started < 10


def test_nesting_a_config_can_need_still_loads() -> None:
    schema = "{type: object}"
    for _ in range(40):
        schema = f"{{type: object, properties: {{x: {schema}}}}}"
    config = parse_config(
        f"version: 1\ninvariants:\n  - type: custom\n    callable: os.path:join\n    params: {{schema: {schema}}}\n"
    )
    assert config.invariants[0].params["schema"]["type"] == "object"


@pytest.mark.parametrize("kind", ["config", "experiment"])
def test_validate_names_the_file_without_a_traceback(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "deep.yaml"
    deep = "[" * 5000 + "]" * 5000
    if kind == "experiment":
        path.write_text(f"name: x\nagent: {{command: 'true'}}\nphases:\n  - name: p\n    rules: {deep}\n")
    else:
        path.write_text(f"version: 1\nrules: {deep}\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert f"{path}:" in result.output and "nested more than 100 levels deep" in result.output


def test_deep_json_in_a_cassette_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(header("s", "now", "test")) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(CassetteError, match=r"s\.jsonl:2: JSON nested too deeply to read"):
        read_cassette(path)


def test_deep_json_in_an_exchanges_log_names_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "exchanges.jsonl"
    good = json.dumps({"provider": "openai", "session": "s", "model": "gpt-4o"})
    log.write_text(good + "\n" + '{"provider": ' + "[" * 100_000 + "]" * 100_000 + "}\n" + good + "\n")
    result = CliRunner().invoke(main, ["discover", str(log)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{log}:2: JSON nested too deeply to read" in result.output


def rejected(proxy: Any) -> float:
    registry = proxy.addon.pipeline.exporters.metrics.registry
    return registry.get_sample_value("brownout_config_reloads_total", {"outcome": "rejected"}) or 0.0


GOOD = (
    "version: 1\nseed: 1\nrules:\n  - name: down\n    match: {path: /weather}\n"
    "    fault: {type: http_error, status: 503}\n    schedule: {}\n"
)


def status(proxy: Any, up: RawUpstream) -> int:
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
        return client.get(up.url + "/weather").status_code


def test_a_hot_reload_of_a_too_deep_file_is_rejected_and_counted(brownout_proxy, tmp_path: Path) -> None:
    path = tmp_path / "live.yaml"
    path.write_text(GOOD)
    proxy = brownout_proxy(path, extra_options={"brownout_reload_s": 0})
    up = RawUpstream(fixed(http_response(200, [("content-type", "application/json")], b"{}")))
    with up.running():
        assert status(proxy, up) == 503
        path.write_text(GOOD + "  - name: deep\n    match: {path: " + "[" * 5000 + "]" * 5000 + "}\n")
        ok, message = proxy.addon.reload_from_file(str(path))
        assert not ok and f"{path}:9: nested more than 100 levels deep" in message
        assert rejected(proxy) == 1.0
        assert status(proxy, up) == 503  # the last good config still acts


def test_a_reload_that_fails_while_being_applied_is_rejected_and_counted(brownout_proxy, tmp_path: Path) -> None:
    path = tmp_path / "live.yaml"
    path.write_text(GOOD)
    proxy = brownout_proxy(path, extra_options={"brownout_reload_s": 0})
    path.write_text(GOOD + f"replay: {{dir: {tmp_path / 'no-such-cassettes'}}}\n")
    ok, message = proxy.addon.reload_from_file(str(path))
    assert not ok and "no such cassette directory" in message
    assert rejected(proxy) == 1.0 and proxy.addon.config.replay.dir is None


def big_config(rules: int) -> str:
    """`rules` - 1 rules for hosts no request goes to, then one that answers /weather with a 502."""
    lines = ["version: 1", "seed: 1", "rules:"]
    for i in range(rules - 1):
        lines.append(
            f"  - {{name: r{i}, match: {{host: 'h{i}.example.com', path: '/v1/*'}}, "
            "fault: {type: http_error, status: 503}, schedule: {probability: 0.5}}"
        )
    lines.append("  - {name: last, match: {path: /weather}, fault: {type: http_error, status: 502}, schedule: {}}")
    return "\n".join(lines) + "\n"


def test_building_a_config_leaves_no_cyclic_garbage() -> None:
    """What `brownout run` relies on to freeze a reloaded config with the rest of its heap (proxy.heap)."""
    engine = FaultEngine()
    text = big_config(500)
    gc.collect()
    gc.disable()
    try:
        config = parse_config(text, "big.yaml")
        rules = engine.prepare(config.ruleset)
        engine.reload(config.ruleset, rules)
        engine.reload(parse_config(GOOD, "good.yaml").ruleset)
        del config, rules
        assert gc.collect() == 0
    finally:
        gc.enable()


# `brownout run`'s own serving path, in a process of its own: a probe on the proxy's loop measures how
# late it wakes from 2 ms sleeps while a 10,000-rule config is reloaded as the watcher and POST /reload
# do it (off the loop). Compiling those rules takes `compile_s`: the old reload held the loop that long.
SERVE = """
import asyncio, gc, json, os, signal, sys, time
from brownout.faults.engine import FaultEngine
from brownout.proxy.configload import parse_config
from brownout.proxy.serve import serve_until_signal

confdir, path, big = sys.argv[1:4]
with open(big) as f:
    text = f.read()
ruleset = parse_config(text, big).ruleset
started = time.perf_counter()
FaultEngine().prepare(ruleset)
compile_s = time.perf_counter() - started
del ruleset
tasks = []

def ready(handle):
    async def run():
        while gc.get_freeze_count() == 0:  # started, heap settled
            await asyncio.sleep(0.02)
        lags = []
        async def probe():
            while True:
                t = time.perf_counter()
                await asyncio.sleep(0.002)
                lags.append(time.perf_counter() - t - 0.002)
        probing = asyncio.get_running_loop().create_task(probe())
        await asyncio.sleep(0.3)
        quiet_s = max(lags)
        with open(path, "w") as f:
            f.write(text)
        ok, message = await asyncio.to_thread(handle.addon.reload_from_file, path)
        await asyncio.sleep(1.0)  # collections the reload would set off come now, if at all
        probing.cancel()
        print(json.dumps({"ok": ok, "message": message, "rules": len(handle.addon.engine.rules),
                          "compile_s": compile_s, "quiet_s": quiet_s, "worst_s": max(lags)}), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
    tasks.append(asyncio.get_running_loop().create_task(run()))

options = ["brownout_metrics_listen=127.0.0.1:0", "brownout_control_listen=127.0.0.1:0", "brownout_reload_s=0"]
asyncio.run(serve_until_signal(ready, listen="127.0.0.1:0", confdir=confdir, config_path=path, extra_options=options))
"""


@pytest.mark.timeout(300)
def test_a_10000_rule_config_reloads_without_holding_up_the_loop(confdir: Path, tmp_path: Path) -> None:
    path, big = tmp_path / "live.yaml", tmp_path / "big.yaml"
    path.write_text(GOOD)
    big.write_text(big_config(10_000))
    done = subprocess.run(
        [sys.executable, "-c", SERVE, str(confdir), str(path), str(big)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout + done.stderr
    result = json.loads(lines[-1])
    assert result["ok"] and result["rules"] == 10_000, result
    assert result["quiet_s"] < result["compile_s"] / 3, result  # the probe itself is precise enough
    assert result["worst_s"] < result["compile_s"] / 3, result
