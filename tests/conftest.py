from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from logparse.cli import cli

# the start-up cache (patterns.cache) of the test run lives apart, and goes with it: never the user's
_CACHE = tempfile.mkdtemp(prefix="verl-logscan-test-cache-")
os.environ["VERL_LOGSCAN_CACHE_DIR"] = _CACHE
os.environ.pop("VERL_LOGSCAN_CACHE", None)
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOLDEN = Path(__file__).resolve().parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bless", action="store_true", help="rewrite golden files from the current output")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that drives headless Chromium (the `browser` fixture) is slow: `pytest -m "not slow"`
    leaves it out (README, Development)."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def bless(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--bless"))


def run_cli(args: list[str], input: str | bytes | None = None) -> Result:
    """Invoke the CLI in-process; a real exception (not SystemExit) fails the test with its traceback."""
    runner = CliRunner()
    result = runner.invoke(cli, args, input=input, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(
            "CLI raised:\n" + "".join(traceback.format_exception(*result.exc_info))
        ) from result.exception
    return result


def sample_logs() -> list[Path]:
    return sorted(SAMPLES.glob("*.log"))
