"""A search's report.html, rendered from templates/search.html.j2 with the experiment reports' environment."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from brownout.proxy.experiment import report_html
from brownout.proxy.experiment.search.chart import dose_response
from brownout.proxy.experiment.search.report import value_text

__all__ = ["render_search_html", "write_search_html"]

logger = logging.getLogger(__name__)


def render_search_html(report: dict[str, Any]) -> str:
    template = report_html._environment().get_template("search.html.j2")
    return template.render(report=report, chart_data=dose_response(report), v=value_text)


def write_search_html(path: Path, report: dict[str, Any]) -> None:
    path.write_text(render_search_html(report), encoding="utf-8")
