"""What each python-oracledb error means for the collector, with the driver's own exception objects."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.skip_unless_installed import need

need("oracledb")  # without the `oracle` extra this module skips, naming it

import oracledb  # noqa: E402 - after the skip above
from oracledb import errors  # noqa: E402

from lunlat.engines.dbsession import Kind  # noqa: E402
from lunlat.engines.oracle.metrics import format_le  # noqa: E402
from lunlat.engines.oracle.source import classify, error_code  # noqa: E402
from tests.oracle.emulation import oracle_error  # noqa: E402


def ora(message: str) -> oracledb.Error:
    """An ORA- error as thin mode raises it (the emulation builds it the driver's way)."""
    return oracle_error(message.split(":", 1)[0])


def dpy(code: int, **args: Any) -> oracledb.Error:
    try:
        errors._raise_err(code, **args)
    except oracledb.Error as exc:
        return exc
    raise AssertionError("_raise_err did not raise")


@pytest.mark.parametrize(
    ("exc", "code", "kind"),
    [
        (ora("ORA-00942: table or view does not exist"), "ORA-00942", Kind.NO_GRANT),
        (ora("ORA-01031: insufficient privileges"), "ORA-01031", Kind.NO_GRANT),
        (ora('ORA-00904: "WAIT_TIME_MICRO": invalid identifier'), "ORA-00904", Kind.QUERY_FAILED),
        # Thin mode folds the "connection is gone" server errors into DPY-4011.
        (ora("ORA-03113: end-of-file on communication channel"), "DPY-4011", Kind.LOST),
        (ora("ORA-01033: ORACLE initialization or shutdown in progress"), "ORA-01033", Kind.LOST),
        (ora("ORA-12541: TNS:no listener"), "DPY-6005", Kind.LOST),  # thin: cannot connect
        (ora("ORA-01013: user requested cancel of current operation"), "ORA-01013", Kind.TIMEOUT),
        (dpy(errors.ERR_CALL_TIMEOUT_EXCEEDED, timeout=5000), "DPY-4024", Kind.TIMEOUT),
        (dpy(errors.ERR_NOT_CONNECTED), "DPY-1001", Kind.LOST),
        (dpy(errors.ERR_CONNECTION_CLOSED), "DPY-4011", Kind.LOST),
    ],
)
def test_driver_errors_are_classified_by_their_code(exc: oracledb.Error, code: str, kind: Kind) -> None:
    assert error_code(exc) == code
    found = classify(exc)
    assert (found.kind, found.code) == (kind, code)
    assert "\n" not in found.message


def test_an_unknown_server_error_fails_the_query_not_the_session() -> None:
    assert (
        classify(ora("ORA-04031: unable to allocate 4096 bytes of shared memory")).kind is Kind.QUERY_FAILED
    )


def test_socket_errors_without_a_code_mean_the_connection_is_lost() -> None:
    assert classify(ConnectionResetError(104, "Connection reset by peer")).kind is Kind.LOST


@pytest.mark.parametrize(
    ("micro", "le"),
    [
        (1, "1e-06"),
        (64, "6.4e-05"),
        (128, "0.000128"),
        (512, "0.000512"),
        (1024, "0.001024"),
        (1 << 20, "1.048576"),
        (1 << 25, "33.554432"),
    ],
)
def test_bucket_bounds_print_every_digit_in_seconds(micro: int, le: str) -> None:
    assert format_le(micro) == le
    assert float(le) * 1_000_000 == pytest.approx(micro)
