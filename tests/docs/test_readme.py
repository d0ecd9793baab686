"""README.md stays a front door: short, and it says how to install, try and point an agent at brownout.

The reference lives in docs/ (tests/docs/test_links.py checks the README links every page).
"""

from __future__ import annotations

from tests.docs.mdpages import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_at_most_about_250_lines() -> None:
    assert len(README.splitlines()) <= 250, "move reference material to docs/"


def test_the_readme_gives_the_first_steps() -> None:
    for step in (
        "pip install ",  # a plain install path, without the lock
        "make demo",
        "make test",
        "brownout demo",
        'eval "$(brownout env)"',  # forward proxy
        "brownout exec -c",
        "--mode reverse:",
        "brownout validate",
        "brownout experiment run examples/experiment/exp.yaml",
    ):
        assert step in README, step
