"""The pytest plugin, exercised in a sample test module through pytester."""

from __future__ import annotations

from importlib import metadata

import pytest

from tests.experiment.conftest import needs_proxy

# Installed, brownout registers the plugin through its pytest11 entry point; otherwise name it with -p.
INSTALLED = any(ep.value == "brownout.proxy.pytest_plugin" for ep in metadata.entry_points(group="pytest11"))
PLUGIN_ARGS = () if INSTALLED else ("-p", "brownout.proxy.pytest_plugin")

pytestmark = [needs_proxy, pytest.mark.timeout(120)]

SAMPLE = """
import json, os, urllib.request
import pytest

def call(path, session):
    req = urllib.request.Request(os.environ["DEMO_UPSTREAM"] + path, headers={"x-brownout-session": session})
    try:  # a fresh opener: urlopen's global one keeps the proxy of the first test
        return urllib.request.build_opener().open(req, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code

@pytest.mark.brownout(config="chaos.yaml")
def test_faults_seen(brownout):
    assert os.environ["HTTP_PROXY"].startswith("http://test-test_faults_seen@")
    assert os.environ["BROWNOUT_SESSION"] == "test-test_faults_seen"
    assert call("/tools/weather?city=Paris", brownout.session) == 503
    assert [f.fault for f in brownout.faults()] == ["http_error"]
    assert brownout.faults(rule="tools-down")
    assert len(brownout.exchanges()) == 1
    assert not brownout.violations(severity="critical")

@pytest.mark.brownout(config={"rules": []}, session="quiet")
def test_no_faults(brownout):
    assert call("/tools/weather?city=Paris", brownout.session) == 200
    assert brownout.faults() == [] and brownout.exchanges()[0].session == "quiet"

def test_without_marker(brownout):
    brownout.apply({"rules": [{"name": "x", "match": {"path": "/tools/*"}, "fault": {"type": "http_error", "status": 500}}]})
    assert call("/tools/weather", brownout.session) == 500

BUDGET = {"type": "call_budget", "max_calls": 1, "count": "all"}

@pytest.mark.brownout(config={"proxy": {"analysis": "process"}, "invariants": [BUDGET]})
def test_violations_judged_in_a_second_process(brownout):
    assert call("/tools/weather?city=Paris", brownout.session) == 200
    assert call("/tools/weather?city=Lyon", brownout.session) == 200
    (v,) = brownout.violations(invariant="call_budget")  # waits for the analysis process
    assert v.details["calls"] == 2
"""

CHAOS = """
rules:
  - name: tools-down
    match: {path: "/tools/*"}
    fault: {type: http_error, status: 503}
"""


@pytest.mark.slow
def test_plugin_in_sample_module(
    pytester: pytest.Pytester, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROWNOUT_CONFDIR", confdir)
    pytester.makepyfile(test_sample=SAMPLE)
    pytester.makefile(".yaml", chaos=CHAOS)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--markers")
    result.stdout.fnmatch_lines(["*@pytest.mark.brownout(config=None, session=None, strict=False)*"])


BOOM_PLUGIN = """
from typing import Literal
from brownout.faults.base import Fault, FaultContext, FaultParams

class BoomParams(FaultParams):
    type: Literal["boom"]

class BoomFault(Fault):
    type = "boom"
    Params = BoomParams

    async def before_upstream(self, ctx: FaultContext) -> None:
        raise RuntimeError("boom")

class _Plugin:
    faults = [BoomFault]

plugin = _Plugin()
"""

BOOM_SAMPLE = """
import os, urllib.request
import pytest

BOOM = {"plugins": ["boom_plugin:plugin"], "rules": [{"name": "b", "match": {"path": "/tools/*"}, "fault": {"type": "boom"}}]}

def call(path):
    return urllib.request.build_opener().open(os.environ["DEMO_UPSTREAM"] + path, timeout=10).status

@pytest.mark.brownout(config=BOOM)
def test_warned(brownout):
    assert call("/tools/weather?city=Paris") == 200  # fail-open: the agent's request went through
    assert brownout.internal_errors() == {"fault:boom": 1}

@pytest.mark.brownout(config=BOOM, strict=True)
def test_strict(brownout):
    assert call("/tools/weather?city=Paris") == 200

@pytest.mark.brownout(config={"rules": []})
def test_clean(brownout):
    assert call("/tools/weather?city=Paris") == 200 and brownout.internal_errors() == {}
"""


@pytest.mark.slow
def test_a_contained_failure_warns_and_fails_a_strict_test(
    pytester: pytest.Pytester, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROWNOUT_CONFDIR", confdir)
    pytester.makepyfile(test_sample=BOOM_SAMPLE, boom_plugin=BOOM_PLUGIN)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-q", "-p", "no:cacheprovider", "-rE")
    result.assert_outcomes(passed=3, errors=1)  # test_strict passes, then errors at teardown
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_strict*", "*BrownoutInternalErrorWarning*fault:boom: 1*"])
