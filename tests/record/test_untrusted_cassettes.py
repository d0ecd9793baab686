"""A cassette directory from anywhere: no link out of it is followed, no timing in it hangs a client.

A link to a file outside the directory (a valid cassette even) is refused, clearly, by replay and by
every `brownout cassette` command and `brownout discover`; the recorder and `cassette redact` never
write through a link. Time offsets that are no sane number of seconds (NaN, infinity, negative, 1e9)
stop the load with the file, line and field named, instead of a replay that never answers.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.embed import ProxyStartError
from brownout.proxy.record.cassette import CassetteError, Event, read_cassette, read_dir
from brownout.proxy.record.writer import CassetteWriter
from tests.record.support import chat, player, write_cassette

SECRET = "the-content-of-a-private-file"


def write(path: Path, *lines: dict) -> Path:
    return write_cassette(path, lines)


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A cassette directory with one good file and a link to a cassette outside it."""
    outside = tmp_path / "private"
    outside.mkdir()
    write(outside / "stolen.jsonl", chat("stolen", content=SECRET).to_dict())
    tape = tmp_path / "tape"
    tape.mkdir()
    write(tape / "good.jsonl", chat("good").to_dict())
    (tape / "stolen.jsonl").symlink_to(outside / "stolen.jsonl")
    return tape


def test_replay_refuses_a_link_out_of_the_directory(brownout_proxy, linked: Path) -> None:
    with pytest.raises(ProxyStartError, match=r"stolen\.jsonl: a symbolic link to .*outside the cassette directory"):
        player(brownout_proxy, linked)


def test_a_link_that_stays_inside_the_directory_is_read(linked: Path) -> None:
    (linked / "stolen.jsonl").unlink()
    (linked / "again.jsonl").symlink_to(linked / "good.jsonl")
    assert [c.session for c in read_dir(linked)] == ["good", "good"]


@pytest.mark.parametrize(
    "command",
    [
        ["cassette", "ls"],
        ["cassette", "show"],
        ["cassette", "redact"],
        ["cassette", "har", "-o", "out.har"],
        ["discover"],
    ],
    ids=["ls", "show", "redact", "har", "discover"],
)
def test_every_command_refuses_a_link_out_of_the_directory(linked: Path, command: list[str]) -> None:
    outside = linked.parent / "private" / "stolen.jsonl"
    before = outside.read_bytes()
    out = linked.parent / "out.har"
    command = [str(out) if arg == "out.har" else arg for arg in command]
    args = [*command[:2], str(linked), *command[2:]] if command[0] == "cassette" else [*command, str(linked)]
    result = CliRunner().invoke(main, args)
    har = out.read_text() if out.exists() else ""
    assert result.exit_code != 0, result.output
    assert "outside the cassette directory" in result.output and "Traceback" not in result.output
    assert SECRET not in result.output + har
    assert outside.read_bytes() == before


def test_the_recorder_never_writes_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    tape = tmp_path / "tape"
    tape.mkdir()
    (tape / "s.jsonl").symlink_to(target)
    writer = CassetteWriter(tape)
    writer.put(chat("s"))
    writer.close()
    assert target.read_text() == "precious\n" and writer.written == 0 and writer.dropped == 1


def test_redact_never_writes_through_a_link_left_under_its_temporary_name(tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    tape = tmp_path / "tape"
    tape.mkdir()
    write(tape / "s.jsonl", chat("s").to_dict())
    (tape / "s.jsonl.tmp").symlink_to(target)
    result = CliRunner().invoke(main, ["cassette", "redact", str(tape)])
    assert result.exit_code == 2 and "symbolic link" in result.output and "Traceback" not in result.output
    assert target.read_text() == "precious\n"


BAD_TIMES = [math.nan, math.inf, -1.0, 1e9]


def _with(field: str, value: float) -> dict:
    line = chat("s", events=None).to_dict()
    response = line["response"]
    if field == "events":
        del response["body"]
        response["events"] = [{"t": 0.01, "text": "data: {}\n\n"}, {"t": value, "text": "data: [DONE]\n\n"}]
    else:
        response[field] = value
    return line


@pytest.mark.parametrize("value", BAD_TIMES, ids=["nan", "inf", "negative", "1e9"])
@pytest.mark.parametrize(
    ("field", "named"),
    [("headers_s", "response.headers_s"), ("end_s", "response.end_s"), ("events", r"response.events\[1\].t")],
)
def test_a_time_offset_that_is_no_sane_number_of_seconds_is_refused_naming_it(
    tmp_path: Path, field: str, named: str, value: float
) -> None:
    path = write(tmp_path / "s.jsonl", _with(field, value))
    with pytest.raises(CassetteError, match=rf"s\.jsonl:2: {named}: .* (from 0 to 86400 s|number of seconds)"):
        read_cassette(path)


def test_replay_of_a_cassette_that_would_wait_1e9_seconds_does_not_start(brownout_proxy, tmp_path: Path) -> None:
    tape = tmp_path / "tape"
    tape.mkdir()
    write(tape / "s.jsonl", _with("headers_s", 1e9))
    with pytest.raises(ProxyStartError, match=r"s\.jsonl:2: response\.headers_s: 1000000000\.0 s is not a time"):
        player(brownout_proxy, tape)


def test_a_replay_speed_that_is_no_number_is_refused(brownout_proxy, tmp_path: Path) -> None:
    with pytest.raises(ProxyStartError, match="replay speed must be 0 or more, got 'nan'"):
        player(brownout_proxy, tmp_path, extra_options={"brownout_replay_speed": "nan"})


def test_other_values_no_recording_holds_are_refused(tmp_path: Path) -> None:
    line = chat("s").to_dict()
    line["response"]["status"] = 99999
    with pytest.raises(CassetteError, match=r"s\.jsonl:2: response\.status: 99999 is not an HTTP status"):
        read_cassette(write(tmp_path / "s.jsonl", line))
    line = chat("s").to_dict()
    line["recorded_at"] = math.nan
    with pytest.raises(CassetteError, match=r"s\.jsonl:2: recorded_at: nan is not a time"):
        read_cassette(write(tmp_path / "s.jsonl", line))


def test_well_formed_times_still_load(tmp_path: Path) -> None:
    events = [Event(0.0, b"data: {}\n\n"), Event(86_400.0, b"data: [DONE]\n\n")]
    path = write(tmp_path / "s.jsonl", chat("s", events=events, headers_s=0, end_s=86_400).to_dict())
    [rec] = read_cassette(path).exchanges
    assert rec.end_s == 86_400.0 and [e.t for e in rec.events or []] == [0.0, 86_400.0]
