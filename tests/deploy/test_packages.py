"""The DEB and RPM of deploy/packages/ (docs/deploy/packages.md), built by their one command and tried
for real: the DEB installed on Debian 12 with systemd as PID 1 (a podman container made from Debian
packages with mmdebstrap), its service started, scraped, reloaded, restarted, stopped and purged; the
RPM's files, dependencies and scripts read with rpm.

Skips with the reason where nfpm, podman, mmdebstrap or rpm is missing (.ci/run installs them). The
base image is built once per machine (about 40 s) and kept as lunlat-test-systemd; a run then takes
about a minute, most of it the build (downloading the wheels) and the DEB's install (building its venv).
"""

from __future__ import annotations

import hashlib
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.polling import wait_until
from tests.support.skip_unless_installed import command

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "lunlat.service"
# The base: Debian 12 with systemd as init, its D-Bus, the python3 the package builds on (bookworm's
# python3 is 3.11) and procps, which the DEB depends on for /bin/kill (the unit's ExecReload=).
# mmdebstrap fetches with this machine's apt settings and CA certificates on the host side, so nothing
# of them lands in the image.
MMDEBSTRAP = [
    "mmdebstrap",
    "--quiet",
    "--variant=minbase",
    "--include=systemd,systemd-sysv,dbus,python3,python3-venv,procps",
    "bookworm",
    "-",
]
# Kept between runs (built once per machine); the tag changes with what it is built from.
IMAGE = f"lunlat-test-systemd:{hashlib.sha256(' '.join(MMDEBSTRAP).encode()).hexdigest()[:12]}"
METRICS = "http://127.0.0.1:10431/metrics"


def _nfpm() -> str:
    found = shutil.which("nfpm")
    if found is None:
        go = shutil.which("go")
        if go is not None:
            gopath = subprocess.run([go, "env", "GOPATH"], capture_output=True, text=True, check=False)
            candidate = Path(gopath.stdout.strip()) / "bin" / "nfpm"
            found = str(candidate) if candidate.is_file() else None
    if found is None:
        pytest.skip("nfpm is not installed (go install github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2)")
    return found


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The DEB and RPM, built by deploy/packages/build (the one command the docs give)."""
    nfpm = _nfpm()
    out = tmp_path_factory.mktemp("packages")
    python = shutil.which("python3") or "python3"
    venv_python = ROOT / ".venv" / "bin" / "python"
    # The caller's environment (a proxy, pip's index settings) with the two tools named.
    env = {**os.environ, "NFPM": nfpm, "PYTHON": str(venv_python) if venv_python.exists() else python}
    done = subprocess.run(
        [str(ROOT / "deploy" / "packages" / "build"), str(out)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    [deb] = out.glob("lunlat_*_amd64.deb")
    [rpm] = out.glob("lunlat-*.x86_64.rpm")
    return {"deb": deb, "rpm": rpm}


# --- the default config ------------------------------------------------------------------------------


def test_the_default_config_and_its_commented_examples_are_valid(tmp_path: Path) -> None:
    """/etc/lunlat/lunlat.yaml as shipped, and with every commented example block uncommented."""
    shipped = ROOT / "deploy" / "packages" / "lunlat.yaml"
    lines = shipped.read_text(encoding="utf-8").splitlines()
    # Example blocks: a "# key:" line and the "#   …" lines under it.
    uncommented = [line[2:] if re.match(r"# (luns|oracle|mssql):$|#   ", line) else line for line in lines]
    assert sum(1 for a, b in zip(lines, uncommented, strict=True) if a != b) > 10
    full = tmp_path / "lunlat.yaml"
    full.write_text("\n".join(uncommented) + "\n", encoding="utf-8")
    for config in (shipped, full):
        done = subprocess.run(
            [sys.executable, "-m", "lunlat", "check-config", "--syntax-only", str(config)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert "(2 luns entries, 1 Oracle targets, 1 SQL Server targets)" in done.stdout


# --- the RPM ---------------------------------------------------------------------------------------


def _rpm(*args: str) -> str:
    rpm = command("rpm", "rpm")
    return subprocess.run([rpm, *args], capture_output=True, text=True, check=True, timeout=60).stdout


def test_the_rpm_holds_the_exporter_the_unit_and_a_kept_config(packages: dict[str, Path]) -> None:
    rpm = str(packages["rpm"])
    files = _rpm("-qpl", rpm).split()
    assert "/usr/lib/systemd/system/lunlat.service" in files
    assert "/usr/lib/systemd/system/lunlat.service.d/runtime.conf" in files
    assert "/usr/lib/lunlat/lunlat-runtime" in files
    wheels = [f for f in files if f.startswith("/usr/share/lunlat/wheels/")]
    assert any(re.search(r"/lunlat-[\d.]+-py3-none-any\.whl$", f) for f in wheels)
    # One wheel per CPython version where the project ships them so, for both versions served.
    for name in ("pydantic_core", "pyyaml", "oracledb", "pyodbc"):
        assert {v for v in ("cp311", "cp312") if any(f"/{name}-" in w and f"-{v}-" in w for w in wheels)} == {
            "cp311",
            "cp312",
        }, name
    assert not [f for f in files if "lunlat_lab" in f or "/lab/" in f]
    # %config(noreplace): rpm's file flags "c" (config) and "n" (noreplace).
    flags = _rpm("-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", rpm)
    assert "/etc/lunlat/lunlat.yaml cn" in flags.splitlines()
    requires = _rpm("-qpR", rpm).splitlines()
    assert "(python3.12 or python3.11 or python312 or python311)" in requires


def test_the_rpm_scripts_create_the_user_build_the_runtime_and_clean_up(packages: dict[str, Path]) -> None:
    scripts = _rpm("-qp", "--scripts", str(packages["rpm"]))
    parts = re.split(r"^(\w+) scriptlet \(using /bin/sh\):$", scripts, flags=re.M)
    by_name = dict(zip(parts[1::2], parts[2::2], strict=True))
    assert set(by_name) == {"preinstall", "postinstall", "preuninstall", "postuninstall"}
    assert "useradd --system" in by_name["preinstall"] and "no_python" in by_name["preinstall"]
    assert "lunlat-runtime build" in by_name["postinstall"]
    assert "systemctl preset lunlat.service" in by_name["postinstall"]
    assert "disable --now lunlat.service" in by_name["preuninstall"]
    assert "rm -rf /opt/lunlat" in by_name["postuninstall"]
    for name, script in by_name.items():  # each parses as the /bin/sh rpm runs it with
        parsed = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True, check=False)
        assert parsed.returncode == 0, f"{name}: {parsed.stderr}"
    # The user stays (docs/deploy/packages.md, "Remove"): no command removes it.
    commands = [line for line in scripts.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in commands if re.search(r"\b(userdel|groupdel|deluser)\b", line)]


def test_the_deb_marks_its_config_a_conffile(packages: dict[str, Path]) -> None:
    dpkg_deb = command("dpkg-deb", "dpkg")
    conffiles = subprocess.run(
        [dpkg_deb, "--info", str(packages["deb"]), "conffiles"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert conffiles == ["/etc/lunlat/lunlat.yaml"]
    control = subprocess.run(
        [dpkg_deb, "--field", str(packages["deb"]), "Depends"], capture_output=True, text=True, check=True
    ).stdout
    assert "python3.12 | python3.11" in control


def test_both_packages_carry_the_biolatency_programs_and_recommend_libbpf(
    packages: dict[str, Path], tmp_path: Path
) -> None:
    dpkg_deb = command("dpkg-deb", "dpkg")
    subprocess.run([dpkg_deb, "-x", str(packages["deb"]), str(tmp_path)], check=True)
    (wheel,) = (tmp_path / "usr/share/lunlat/wheels").glob("lunlat-*.whl")
    with zipfile.ZipFile(wheel) as zipped:
        names = zipped.namelist()
        assert "lunlat/sources/bpf/biolatency.bpf.o" in names
        assert zipped.read("lunlat/sources/bpf/biolatency.bpf.o")[:4] == b"\x7fELF"
    recommends = subprocess.run(
        [dpkg_deb, "--field", str(packages["deb"]), "Recommends"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert recommends == ["libbpf1"]
    assert "libbpf" in _rpm("-qp", "--recommends", str(packages["rpm"])).split()


# --- the DEB under systemd ----------------------------------------------------------------------------


class Container:
    """A Debian 12 container with systemd as PID 1, driven with `podman exec`."""

    def __init__(self, podman: str, name: str) -> None:
        self.podman, self.name = podman, name

    def run(self, script: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.podman, "exec", self.name, "sh", "-c", script],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        if check:
            assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
        return done

    def metrics(self) -> str:
        fetch = (
            f'import urllib.request; print(urllib.request.urlopen("{METRICS}", timeout=5).read().decode())'
        )
        return self.run(f"python3 -c '{fetch}'").stdout

    def sample(self, name: str) -> float | None:
        try:
            text = self.metrics()
        except AssertionError:
            return None
        found = re.search(rf"^{name} (\S+)$", text, flags=re.M)
        return float(found.group(1)) if found else None

    def active(self) -> str:
        return self.run("systemctl is-active lunlat.service", check=False).stdout.strip()

    def main_pid(self) -> str:
        return self.run("systemctl show --property=MainPID --value lunlat.service").stdout.strip()


def _base_image(podman: str) -> None:
    if subprocess.run([podman, "image", "exists", IMAGE], check=False).returncode == 0:
        return
    mmdebstrap = command("mmdebstrap", "mmdebstrap")
    with subprocess.Popen([mmdebstrap, *MMDEBSTRAP[1:]], stdout=subprocess.PIPE) as build:
        imported = subprocess.run(
            [podman, "import", "-", IMAGE], stdin=build.stdout, capture_output=True, check=False, timeout=900
        )
        built = build.wait(timeout=900)
    assert built == 0 and imported.returncode == 0, imported.stderr


def _run_options() -> list[str]:
    """podman's rootful defaults raise RLIMIT_NOFILE and RLIMIT_NPROC (containers.conf default_ulimits),
    which needs CAP_SYS_RESOURCE a build machine may not grant: the container gets this process's own
    open-files limit and a modest process limit instead. runc where installed: crun refuses cgroups in
    hybrid mode while a controller sits on the cgroup2 hierarchy ("drop all controllers from cgroupv2",
    seen on this project's CI machine, whose hugetlb controller is there)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    options = ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096"]
    if shutil.which("runc"):
        options += ["--runtime", "runc"]
    return options


@pytest.fixture(scope="module")
def host(packages: dict[str, Path]) -> Iterator[Container]:
    podman = command("podman", "podman")
    if os.geteuid() != 0:
        pytest.skip("needs root: systemd runs as PID 1 in a privileged (rootful) podman container")
    _base_image(podman)
    name = f"lunlat-test-systemd-{uuid.uuid4().hex[:8]}"
    volume = f"{packages['deb'].parent}:/packages:ro"
    argv = [podman, "run", "-d", "--name", name, "--privileged", "--systemd=always", *_run_options()]
    started = subprocess.run(
        [*argv, "-v", volume, IMAGE, "/sbin/init"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    container = Container(podman, name)
    try:
        # `is-system-running --wait` returns once startup is over (systemctl(1)).
        container.run("systemctl is-system-running --wait || true", timeout=120)
        yield container
    finally:
        subprocess.run([podman, "rm", "-f", "-t", "0", name], capture_output=True, check=False, timeout=120)


@pytest.fixture(scope="module")
def deb(packages: dict[str, Path]) -> str:
    return f"/packages/{packages['deb'].name}"


def test_1_without_a_usable_python_the_install_fails_naming_the_package(host: Container, deb: str) -> None:
    """dpkg would refuse the DEB for its Depends first; forced past them (or installed where the
    interpreter is there but broken), the postinst fails naming the package to install."""
    host.run("mv /usr/bin/python3.11 /usr/bin/python3.11.away")
    try:
        done = host.run(f"dpkg --force-depends -i {deb}", check=False)
        status = host.run("dpkg-query -W -f '${Status}' lunlat", check=False).stdout
        assert host.run("test -e /opt/lunlat", check=False).returncode != 0
        host.run("dpkg --purge lunlat")
    finally:
        host.run("mv /usr/bin/python3.11.away /usr/bin/python3.11")
    assert done.returncode != 0
    assert "lunlat: install python3.11 (apt install python3.11)" in done.stderr
    assert status == "install ok half-configured"


def test_2_installed_the_service_runs_as_lunlat_and_is_scraped(host: Container, deb: str) -> None:
    # The runtime is made without ensurepip, which Debian splits into python3.X-venv: not needed.
    host.run("dpkg -r python3-venv python3.11-venv")
    install = host.run(f"dpkg -i {deb}")
    assert "runtime built in /opt/lunlat with /usr/bin/python3.11" in install.stdout
    wait_until(lambda: host.sample("lunlat_config_last_reload_successful") == 1.0, "a scrape", timeout=60)
    text = host.metrics()
    assert re.search(r"^lunlat_build_info\{.*version=\"", text, flags=re.M)
    assert re.search(r"^lunlat_device_reads_completed_total\{", text, flags=re.M)
    assert host.run(f"stat -c %U /proc/{host.main_pid()}").stdout.strip() == "lunlat"
    assert host.run("stat -c '%U:%G %a' /etc/lunlat/credentials").stdout.strip() == "root:lunlat 750"
    # systemd 252 here: every hardening drop-in applies.
    dropins = host.run("systemctl show --property=DropInPaths --value lunlat").stdout
    assert all(f"hardening-{v}.conf" in dropins for v in (242, 244, 245)) and "runtime.conf" in dropins
    assert host.run("systemctl show --property=ProtectClock --value lunlat").stdout.strip() == "yes"


def test_3_reload_rereads_the_config(host: Container) -> None:
    before = host.sample("lunlat_config_last_reload_success_timestamp_seconds")
    assert before is not None
    time.sleep(1.1)  # the timestamp has a second's resolution at worst
    host.run("systemctl reload lunlat")

    def moved() -> bool:
        after = host.sample("lunlat_config_last_reload_success_timestamp_seconds")
        return after is not None and after > before

    wait_until(moved, "the reload's success timestamp to move", timeout=30)
    assert host.sample("lunlat_config_last_reload_successful") == 1.0
    # A broken edit: the reload fails, the service keeps serving the previous config.
    host.run("cp /etc/lunlat/lunlat.yaml /tmp/good.yaml && echo 'diskstats: [' >> /etc/lunlat/lunlat.yaml")
    host.run("systemctl reload lunlat")
    wait_until(
        lambda: host.sample("lunlat_config_last_reload_successful") == 0.0, "a failed reload", timeout=30
    )
    assert host.active() == "active"
    host.run("cp /tmp/good.yaml /etc/lunlat/lunlat.yaml && systemctl reload lunlat")
    wait_until(
        lambda: host.sample("lunlat_config_last_reload_successful") == 1.0, "a good reload", timeout=30
    )


ORACLE_CONFIG = """diskstats: {}
oracle:
  - name: ORCLPDB1
    dsn: dbhost.invalid:1521/ORCLPDB1
    user: LUNLAT
    password_file: /etc/lunlat/credentials/oracle_password
"""
# The unit itself, with `check-config` as its command: the same user, group and sandbox as `serve`.
CHECK_UNIT = (
    "sed -e 's#^ExecStart=.*#ExecStart=/opt/lunlat/bin/lunlat check-config /etc/lunlat/lunlat.yaml#'"
    " -e 's#^Type=simple#Type=oneshot#' -e '/^ExecReload=/d' -e '/^Restart/d'"
    " /usr/lib/systemd/system/lunlat.service > /run/systemd/system/lunlat-check.service"
    " && systemctl daemon-reload"
)


def test_4_database_passwords_reach_the_service_from_the_credentials_directory(host: Container) -> None:
    """As docs/deploy/systemd.md says: a file in /etc/lunlat/credentials/, root-owned, group lunlat,
    0640. Checked under the unit's own user and sandbox; check-config refuses an empty password and
    one it cannot read, so a pass means the password arrived."""
    host.run("cp /etc/lunlat/lunlat.yaml /tmp/good.yaml")
    host.run(f"cat > /etc/lunlat/lunlat.yaml <<'EOF'\n{ORACLE_CONFIG}EOF")
    host.run(CHECK_UNIT)

    def check(password_setup: str) -> tuple[int, str]:
        host.run(f"{password_setup} && systemctl reset-failed lunlat-check 2>/dev/null; true")
        done = host.run("systemctl start lunlat-check", check=False)
        log = host.run("journalctl -u lunlat-check --no-pager -o cat | tail -n 20").stdout
        return done.returncode, log

    path = "/etc/lunlat/credentials/oracle_password"
    code, log = check(f": > {path} && chown root:lunlat {path} && chmod 0640 {path}")
    assert code != 0 and f"{path} is empty" in log
    code, log = check(f"printf 's3cret\\n' > {path} && chown root:root {path} && chmod 0600 {path}")
    assert code != 0 and f"cannot read {path}" in log
    code, log = check(f"chown root:lunlat {path} && chmod 0640 {path}")
    assert code == 0, log
    host.run("cp /tmp/good.yaml /etc/lunlat/lunlat.yaml && rm -f /run/systemd/system/lunlat-check.service")
    host.run("systemctl daemon-reload")


def test_5_restart_stop_and_a_runtime_gone_at_start(host: Container) -> None:
    pid = host.main_pid()
    host.run("systemctl restart lunlat")
    wait_until(lambda: host.sample("lunlat_config_last_reload_successful") == 1.0, "a scrape", timeout=60)
    assert host.main_pid() not in (pid, "0")
    host.run("systemctl stop lunlat")
    assert host.active() == "inactive"
    assert host.sample("lunlat_config_last_reload_successful") is None  # nothing listens
    # The interpreter the runtime was built with, removed: the start fails and says what to install.
    host.run("mv /usr/bin/python3.11 /usr/bin/python3.11.away")
    try:
        assert host.run("systemctl start lunlat", check=False).returncode != 0
        log = host.run("journalctl -u lunlat --no-pager -o cat | tail -n 5").stdout
    finally:
        host.run("mv /usr/bin/python3.11.away /usr/bin/python3.11 && systemctl reset-failed lunlat")
    assert "lunlat: install python3.11 (apt install python3.11)" in log


def test_6_an_upgrade_keeps_the_admins_config(host: Container, deb: str) -> None:
    host.run("systemctl start lunlat && echo '# edited by the admin' >> /etc/lunlat/lunlat.yaml")
    wait_until(lambda: host.sample("lunlat_config_last_reload_successful") == 1.0, "a scrape", timeout=60)
    pid = host.main_pid()
    host.run(f"dpkg -i --force-confold {deb}")
    assert "# edited by the admin" in host.run("cat /etc/lunlat/lunlat.yaml").stdout
    # Restarted on the rebuilt runtime (postinst: try-restart).
    wait_until(
        lambda: host.main_pid() not in (pid, "0"), "the service's restart after the upgrade", timeout=60
    )
    wait_until(lambda: host.sample("lunlat_config_last_reload_successful") == 1.0, "a scrape", timeout=60)


def test_7_purge_removes_config_and_runtime_and_keeps_the_user(host: Container) -> None:
    host.run("dpkg --purge lunlat")
    assert host.active() in ("inactive", "unknown")
    for gone in ("/etc/lunlat", "/opt/lunlat", "/usr/lib/systemd/system/lunlat.service"):
        assert host.run(f"test -e {gone}", check=False).returncode != 0, gone
    assert host.run(
        "test -L /etc/systemd/system/multi-user.target.wants/lunlat.service", check=False
    ).returncode
    # Debian Policy is silent on removing system users; the project's practice (docs/deploy/packages.md):
    # they stay, so no later account inherits their files.
    assert host.run("getent passwd lunlat").stdout.startswith("lunlat:")
