"""Fixtures for the reliability tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.badinput import close_clients


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Cached httpx clients (badinput.client_for) never outlive a test."""
    yield
    close_clients()
