"""bench/llm.py: the LLM-shaped cases run through real servers, and their verdicts hold at their bounds.

No timing is asserted: the measurement itself is `python bench/run.py` on a quiet machine
(docs/benchmark.md). The run here is a fraction of a second per case, to show the cases work.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from rich.console import Console

from bench import run as bench_run
from bench.llm import CASES, LLM_PATHS, REFERENCE_PATHS, answer_ok, llm_targets, measure_llm, render_llm_rows
from bench.load import Request, _read_response, wrk_command, wrk_script
from bench.procs import ROOT, Proc, start_brownout, start_mitmdump, start_upstream
from bench.publish import render_llm, render_llm_reference, render_results
from bench.report import missed, print_report
from bench.run import build_parser


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    """The bench's own subprocesses: the mock upstream, plain mitmdump, brownout with everything on (its
    analysis inline, and in a second process)."""
    work = tmp_path_factory.mktemp("bench")
    procs: list[Proc] = []
    try:
        upstream = start_upstream(work)
        procs.append(upstream)
        procs.append(start_mitmdump(upstream.port, work))
        ports = {"direct": upstream.port, "mitmdump": procs[1].port}
        for name, config in (("brownout-all-on", "all-on.yaml"), ("brownout-all-on-process", "all-on-process.yaml")):
            brownout = start_brownout(upstream.port, work / name, str(ROOT / "bench" / config))
            assert isinstance(brownout, Proc), brownout
            procs.append(brownout)
            ports[name] = brownout.port
        yield ports
    finally:
        for proc in reversed(procs):
            proc.stop()


@pytest.mark.slow
def test_each_case_runs_through_every_path_and_is_judged(servers: dict[str, int]) -> None:
    llm = measure_llm(servers, duration_s=0.3, rounds=1, use_wrk=False)
    assert llm["paths"] == list(LLM_PATHS)
    assert llm["checked"] == {case.name: dict.fromkeys(LLM_PATHS, True) for case in CASES}
    for case in CASES:
        for path in LLM_PATHS:
            for c in ("c1", "c8"):
                run = llm["cases"][case.name][path][c]
                assert run["requests"] > 0 and run["errors"] == 0, (case.name, path, c, run)
    targets = llm_targets(llm)
    assert len(targets) == 7 * len(CASES)  # each all-on path: 2 throughput ratios and p99; answers whole
    assert all(t["value"] is not None and t["group"] == "llm" for t in targets.values())  # all measured
    assert all(targets[f"{case.name}: broken_answers_and_load_errors"]["met"] for case in CASES)


@pytest.mark.slow
def test_a_path_that_breaks_the_answer_is_caught(servers: dict[str, int]) -> None:
    case = CASES[1]  # a stream
    assert answer_ok(servers["brownout-all-on"], case) and answer_ok(servers["brownout-all-on-process"], case)
    broken = type(case)(case.name, "/no/such/route", case.body, case.complete)  # the mock answers 404
    assert not answer_ok(servers["direct"], broken)
    stream_cut = type(case)(case.name, case.path, {**case.body, "stream": False}, case.complete)  # no [DONE]
    assert not answer_ok(servers["direct"], stream_cut)


def _run(rps: dict[str, float], p99: dict[str, float], checked: dict[str, bool] | None = None) -> dict[str, Any]:
    def path(name: str) -> dict[str, Any]:
        load = {"rps": rps[name], "p50_ms": 1.0, "p99_ms": p99[name], "errors": 0, "requests": 100}
        return {"c1": dict(load), "c8": dict(load)}

    return {
        "paths": list(LLM_PATHS),
        "cases": {"openai-tools": {name: path(name) for name in LLM_PATHS}},
        "checked": {"openai-tools": checked or dict.fromkeys(LLM_PATHS, True)},
    }


@pytest.mark.parametrize(
    ("all_on_rps", "all_on_p99", "failing"),
    [
        (900.0, 5.0, set()),  # exactly 0.90x mitmdump, exactly its p99 + 2 ms
        (899.0, 5.0, {"rps_ratio_vs_mitmdump_c1", "rps_ratio_vs_mitmdump_c8"}),
        (950.0, 5.01, {"p99_added_vs_mitmdump_c1_ms"}),
    ],
)
def test_the_all_on_targets_hold_per_case_against_plain_mitmdump(
    all_on_rps: float, all_on_p99: float, failing: set[str]
) -> None:
    for name in ("brownout-all-on", "brownout-all-on-process"):  # the other one is fine
        rps = {"direct": 9000.0, "mitmdump": 1000.0, "brownout-all-on": 1000.0, "brownout-all-on-process": 1000.0}
        p99 = {"direct": 0.5, "mitmdump": 3.0, "brownout-all-on": 3.0, "brownout-all-on-process": 3.0}
        run = _run({**rps, name: all_on_rps}, {**p99, name: all_on_p99})
        missed_lines = missed(llm_targets(run))
        assert {line.split(": ")[2] for line in missed_lines} == failing
        assert all(line.startswith(f"{name}: ") for line in missed_lines)


def test_a_broken_answer_or_a_load_error_misses_the_case() -> None:
    fine = {"direct": 9000.0, "mitmdump": 1000.0, "brownout-all-on": 1000.0, "brownout-all-on-process": 1000.0}
    p99 = dict.fromkeys(fine, 3.0)
    run = _run(fine, p99, checked={**dict.fromkeys(fine, True), "brownout-all-on-process": False})
    assert missed(llm_targets(run)) == ["openai-tools: broken_answers_and_load_errors: 1 (target <= 0)"]
    run = _run(fine, p99)
    run["cases"]["openai-tools"]["mitmdump"]["c8"]["errors"] = 3
    assert missed(llm_targets(run)) == ["openai-tools: broken_answers_and_load_errors: 3 (target <= 0)"]


def test_the_llm_section_renders_every_case_path_and_target_apart_from_the_ping_table() -> None:
    published = json.loads((ROOT / "bench" / "results" / "published" / "run.json").read_text())
    llm = _run(
        {"direct": 9000.0, "mitmdump": 1000.0, "brownout-all-on": 850.0, "brownout-all-on-process": 950.0},
        {"direct": 0.5, "mitmdump": 3.0, "brownout-all-on": 4.0, "brownout-all-on-process": 4.0},
    )
    # The published run's own LLM targets give way to these (only openai-tools).
    ping_targets = {k: t for k, t in published["targets"].items() if t.get("group") != "llm"}
    data = {**published, "llm": llm, "targets": {**ping_targets, **llm_targets(llm)}}
    text = render_llm(data)
    for path in LLM_PATHS:
        assert f"| openai-tools | {path} |" in text
    assert "| brownout-all-on: openai-tools: rps_ratio_vs_mitmdump_c1 | 0.85x | >= 0.9x | missed |" in text
    assert "| brownout-all-on-process: openai-tools: rps_ratio_vs_mitmdump_c1 | 0.95x | >= 0.9x | met |" in text
    assert "openai-tools" not in render_results(data)  # the /ping table keeps its own targets
    out = io.StringIO()
    print_report({**data, "notes": []}, Console(file=out, width=250))
    assert "LLM-shaped traffic" in out.getvalue() and "anthropic" not in out.getvalue()


def test_wrk_gets_the_request_as_a_lua_script() -> None:
    body = json.dumps({"text": ']]  ]=] quotes " and \\n'}).encode()
    script = wrk_script(Request("POST", body, (("Content-Type", "application/json"),)))
    assert 'wrk.method = "POST"' in script and 'wrk.headers["Content-Type"] = "application/json"' in script
    assert f"wrk.body = [==[{body.decode()}]==]" in script  # a long bracket the body does not close


def test_wrk_runs_whole_seconds_with_the_script() -> None:
    cmd = wrk_command("http://127.0.0.1:1/v1/messages", 8, 0.3, "/tmp/case.lua")
    assert cmd == ["wrk", "-t2", "-c8", "-d1s", "--latency", "-s", "/tmp/case.lua", "http://127.0.0.1:1/v1/messages"]
    assert wrk_command("http://h/ping", 1, 4.0)[3] == "-d4s"


def test_the_python_load_generator_reads_chunked_and_sized_answers_to_their_end() -> None:
    async def read_all(raw: bytes) -> tuple[list[bytes], bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        heads = [await _read_response(reader), await _read_response(reader)]
        return heads, await reader.read()

    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\ndata:\r\n3;x=y\r\n [D\r\n0\r\nx-t: 1\r\n\r\n"
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}\r\n"
    heads, rest = asyncio.run(read_all(chunked + sized + b"NEXT"))
    assert heads[0].startswith(b"HTTP/1.1 200") and b"Content-Length" in heads[1] and rest == b"NEXT"


def test_llm_cases_are_on_by_default() -> None:
    assert build_parser().parse_args([]).no_llm is False
    assert build_parser().parse_args(["--no-llm"]).no_llm is True


@pytest.mark.slow
@pytest.mark.parametrize("reference", [False, True])
def test_llm_only_starts_the_llm_paths_and_measures_only_their_cases(
    monkeypatch: pytest.MonkeyPatch, reference: bool
) -> None:
    seen: dict[str, int] = {}
    cpu_of: dict[str, int] = {}

    def measured(ports: dict[str, int], *args: Any, pids: dict[str, int]) -> dict[str, Any]:
        seen.update(ports)
        cpu_of.update(pids)
        assert all(answer_ok(port, CASES[0]) for port in ports.values())  # each server is up and answering
        return {"paths": list(ports), "cases": {}, "checked": {}}

    monkeypatch.setattr(bench_run, "measure_llm", measured)
    monkeypatch.setattr(bench_run, "_measure_all", lambda *a: pytest.fail("GET /ping measured with --llm-only"))
    data = bench_run.run_bench(0.3, 1, False, None, llm_only=True, llm_reference=reference)
    paths = LLM_PATHS + (REFERENCE_PATHS if reference else ())
    assert sorted(seen) == sorted(paths) and "results" not in data
    assert sorted(cpu_of) == sorted(p for p in paths if p != "direct")  # each proxy's CPU, not the upstream's


def test_llm_only_is_its_own_run() -> None:
    assert build_parser().parse_args(["--llm-only"]).llm_only is True
    for clash in (["--no-llm"], ["--streams-case"]):
        with pytest.raises(SystemExit):
            bench_run.main(["--llm-only", *clash])
    with pytest.raises(SystemExit):
        bench_run.main(["--llm-reference", "--no-llm"])


def _with_reference(rps: dict[str, float], cpu: dict[str, float]) -> dict[str, Any]:
    def path(name: str) -> dict[str, Any]:
        load = {"rps": rps[name], "p50_ms": 1.0, "p99_ms": 3.0, "errors": 0, "requests": 100}
        return {"c1": dict(load), "c8": {**load, "cpu_ms_per_request": cpu[name]}}

    names = ("direct", "mitmdump", "mitmdump-stream", "brownout", "brownout-all-on", "brownout-all-on-process")
    return {
        "paths": list(names),
        "cases": {"openai-tools-stream": {name: path(name) for name in names}},
        "checked": {"openai-tools-stream": dict.fromkeys(names, True)},
    }


def test_the_reference_paths_split_the_gap_into_streaming_and_brownout_without_a_verdict() -> None:
    run = _with_reference(
        {"direct": 9000.0, "mitmdump": 400.0, "mitmdump-stream": 300.0, "brownout": 285.0, "brownout-all-on": 240.0}
        | {"brownout-all-on-process": 390.0},
        {"direct": 0.1, "mitmdump": 2.25, "mitmdump-stream": 3.0, "brownout": 3.25, "brownout-all-on": 3.5}
        | {"brownout-all-on-process": 4.0},
    )
    targets = llm_targets(run)
    case = "openai-tools-stream"
    assert targets[f"mitmdump-stream: {case}: rps_ratio_vs_mitmdump_c1"]["value"] == 0.75
    assert targets[f"mitmdump-stream: {case}: cpu_ms_per_request_added_vs_mitmdump_c8"]["value"] == 0.75
    assert targets[f"brownout: {case}: rps_ratio_vs_mitmdump_stream_c8"]["value"] == 0.95
    assert targets[f"brownout-all-on: {case}: rps_ratio_vs_mitmdump_stream_c1"]["value"] == 0.8
    assert targets[f"brownout-all-on: {case}: cpu_ms_per_request_added_vs_mitmdump_stream_c8"]["value"] == 0.5
    split = {k: t for k, t in targets.items() if "vs_mitmdump_stream" in k or k.startswith("mitmdump-stream")}
    assert targets[f"brownout-all-on-process: {case}: cpu_ms_per_request_added_vs_mitmdump_stream_c8"]["value"] == 1.0
    assert len(split) == 12 and all(t["met"] is None and t["group"] == "llm" for t in split.values())
    # Only the targets judge: all-on at 0.6x plain mitmdump misses, the informational rows do not.
    assert sorted(m.split(": ")[2] for m in missed(targets)) == ["rps_ratio_vs_mitmdump_c1", "rps_ratio_vs_mitmdump_c8"]
    rows = render_llm_rows(run)
    assert rows[0].endswith("| proxy CPU ms/req, 8 conns |")
    assert f"| {case} | mitmdump-stream | 300 | 1.00 | 3.00 | 300 | 3.00 | 3.000 |" in rows


def test_without_the_reference_paths_there_is_no_split_and_no_cpu_column() -> None:
    rps = {"direct": 9000.0, "mitmdump": 1000.0, "brownout-all-on": 950.0, "brownout-all-on-process": 990.0}
    run = _run(rps, dict.fromkeys(LLM_PATHS, 3.0))
    assert not [k for k in llm_targets(run) if "mitmdump_stream" in k]
    assert "CPU" not in render_llm_rows(run)[0]


def test_the_process_config_is_all_on_with_its_analysis_in_a_second_process() -> None:
    inline = yaml.safe_load((ROOT / "bench" / "all-on.yaml").read_text())
    process = yaml.safe_load((ROOT / "bench" / "all-on-process.yaml").read_text())
    assert process.pop("proxy") == {"analysis": "process"} and "proxy" not in inline
    assert process == inline


def test_the_reference_runs_publish_each_all_on_paths_verdicts_side_by_side() -> None:
    rps = {"direct": 9000.0, "mitmdump": 400.0, "mitmdump-stream": 300.0, "brownout": 400.0, "brownout-all-on": 300.0}
    cpu = dict.fromkeys(rps | {"brownout-all-on-process": 0.0}, 2.0)
    meta = json.loads((ROOT / "bench" / "results" / "published" / "llm-reference-1.json").read_text())["meta"]
    runs = []
    for process_rps in (380.0, 340.0):  # 0.95x, then 0.85x
        llm = _with_reference(rps | {"brownout-all-on-process": process_rps}, cpu)
        runs.append({"meta": meta, "llm": llm, "targets": llm_targets(llm)})
    text = render_llm_reference(runs)
    case = "openai-tools-stream"
    assert (
        f"| brownout-all-on-process: {case}: rps_ratio_vs_mitmdump_c1 | 0.95x / 0.85x | >= 0.9x | met / missed |"
        in text
    )
    assert f"| brownout-all-on: {case}: rps_ratio_vs_mitmdump_c8 | 0.75x / 0.75x | >= 0.9x | missed / missed |" in text
