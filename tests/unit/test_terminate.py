"""SIGTERM to a test run tears its fixtures down (tests/support/terminate.py), as .ci/run's early exit
needs; without the plugin it does not, which is why the plugin exists."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = """
import time
from pathlib import Path
import pytest

@pytest.fixture
def resource():
    yield
    Path({torn!r}).write_text("torn down")

def test_holds_it(resource):
    Path({ready!r}).write_text("ready")
    time.sleep(60)
"""


def _terminated_run(tmp_path: Path, *plugin: str) -> tuple[int, bool]:
    """A pytest run holding a fixture, sent SIGTERM once its test runs: its exit code, and whether
    the fixture's teardown ran."""
    torn, ready = tmp_path / "torn", tmp_path / "ready"
    test = tmp_path / "test_held.py"
    test.write_text(textwrap.dedent(RUN.format(torn=str(torn), ready=str(ready))), encoding="utf-8")
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, str(test)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert run.poll() is None and time.monotonic() < deadline, "the run never reached its test"
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    return run.wait(timeout=60), torn.exists()


def test_sigterm_ends_the_run_with_its_fixtures_torn_down(tmp_path: Path) -> None:
    code, torn = _terminated_run(tmp_path, "-p", "tests.support.terminate")
    assert torn, "the fixture's teardown did not run"
    assert code == pytest.ExitCode.INTERRUPTED


def test_without_the_plugin_sigterm_kills_the_run_with_nothing_torn_down(tmp_path: Path) -> None:
    code, torn = _terminated_run(tmp_path)
    assert (code, torn) == (-signal.SIGTERM, False)
