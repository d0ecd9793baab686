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
    result.assert_outcomes(passed=3)


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--markers")
    result.stdout.fnmatch_lines(["*@pytest.mark.brownout(config=None, session=None)*"])
