"""deploy/systemd/lunlat.service: `systemd-analyze verify` finds nothing to say, the unit keeps
the dedicated user, the hardening and the password files docs/deploy/systemd.md promises, and its system call
filter and address families allow everything lunlat does (traced with strace), and every setting it
uses is one systemd 239 knows (tests/deploy/systemd-239-directives.txt, with its source)."""

from __future__ import annotations

import configparser
import functools
import gzip
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, listening_ports, scrape
from tests.support.podman_stack import free_port

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "lunlat.service"
BIOLATENCY_DROP_IN = UNIT.with_name("biolatency.conf")
# The settings systemd 239 understands, with where the list comes from.
DIRECTIVES_239 = Path(__file__).with_name("systemd-239-directives.txt")
INSTALLED_BINARY = "/opt/lunlat/bin/lunlat"
# The config the install steps (docs/deploy/systemd.md) copy to /etc/lunlat/lunlat.yaml.
INSTALLED_CONFIG = ROOT / "deploy" / "lunlat" / "host.yaml"


def verify(text: str, directory: Path, installed: str = INSTALLED_BINARY, name: str = UNIT.name) -> str:
    """systemd-analyze's complaints about the unit `text` (empty when there are none). The binary it
    runs (`installed`) is pointed at a file that exists here: verify refuses a missing ExecStart."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd)")
    binary = directory / Path(installed).name
    binary.write_text("#!/bin/sh\n", encoding="utf-8")
    binary.chmod(0o755)
    unit = directory / name
    assert installed in text, f"{name} does not run {installed}"
    unit.write_text(text.replace(installed, str(binary)), encoding="utf-8")
    done = subprocess.run(
        [tool, "verify", str(unit)], capture_output=True, text=True, check=False, timeout=60
    )
    return (done.stdout + done.stderr).strip() + ("" if done.returncode == 0 else f"\nexit {done.returncode}")


def test_the_unit_verifies_clean(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8")
    assert INSTALLED_BINARY in text
    assert verify(text, tmp_path) == ""


def test_the_fleet_vmagent_unit_verifies_clean_and_names_the_host(tmp_path: Path) -> None:
    """deploy/fleet/lunlat-vmagent.service: vmagent accepts an unset %{LUNLAT_HOST} silently (every host
    would be labelled with the placeholder), so the unit sets it from the host name itself."""
    unit = ROOT / "deploy" / "fleet" / "lunlat-vmagent.service"
    text = unit.read_text(encoding="utf-8")
    assert verify(text, tmp_path, "/usr/bin/vmagent", unit.name) == ""
    assert "Environment=LUNLAT_HOST=%H" in text.splitlines()
    assert "%{LUNLAT_HOST}" in (ROOT / "deploy" / "fleet" / "vmagent.yml").read_text(encoding="utf-8")
    assert "-promscrape.config=/etc/lunlat/vmagent.yml" in text


def test_verify_would_catch_a_misspelt_directive(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8").replace("NoNewPrivileges=yes", "NoNewPrivilege=yes")
    assert "Unknown key 'NoNewPrivilege'" in verify(text, tmp_path)


def test_dedicated_user_hardening_and_credentials() -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    service = parser["Service"]
    assert service["User"] == "lunlat" and service["Group"] == "lunlat"
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
        "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
        # One descriptor a connection: soft = hard = 65536, far above --web.max-connections (512).
        "LimitNOFILE": "65536",
    }.items():
        assert service[key] == value, key
    # Passwords are files the service reads itself (0640, group lunlat): LoadCredential= came in
    # systemd 247 and RHEL 8 has 239 (every setting is checked against 239 below).
    assert "LoadCredential" not in service
    assert service["EnvironmentFile"] == "-/etc/default/lunlat"
    assert "--config.file=/etc/lunlat/lunlat.yaml" in service["ExecStart"]
    assert parser["Install"]["WantedBy"] == "multi-user.target"
    install_steps = UNIT.parents[2] / "docs" / "deploy" / "systemd.md"
    readme = install_steps.read_text(encoding="utf-8")
    assert "password_file: /etc/lunlat/credentials/" in readme and "systemctl enable --now lunlat" in readme


def unit_values(key: str, *drop_ins: Path, unit: Path = UNIT) -> list[str]:
    """Every value of a [Service] key, in order, the unit's then its drop-ins' (configparser keeps
    only the last of repeated keys)."""
    values, section = [], ""
    lines = [line for f in (unit, *drop_ins) for line in f.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        if line.startswith("["):
            section = line.strip()
        elif section == "[Service]" and line.startswith(f"{key}="):
            values.append(line.split("=", 1)[1].strip())
    return values


@functools.cache
def syscall_set(group: str) -> frozenset[str]:
    """The system calls of a systemd syscall group (`@system-service` …), nested groups expanded."""
    tool = shutil.which("systemd-analyze")
    assert tool is not None
    listed = subprocess.run(
        [tool, "syscall-filter", group], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()[1:]  # the first line is the group's name
    names: set[str] = set()
    for entry in (line.strip() for line in listed):
        if entry and not entry.startswith("#"):
            names |= syscall_set(entry) if entry.startswith("@") else {entry}
    return frozenset(names)


def allowed_syscalls(*drop_ins: Path, unit: Path = UNIT) -> set[str]:
    """What the unit's SystemCallFilter= lines (then its drop-ins') let through. The first line is an
    allow list, so anything else kills the process (SIGSYS); later `~` lines take calls out of it
    again, later allow lines add them back (systemd.exec(5), SystemCallFilter=)."""
    filters = unit_values("SystemCallFilter", *drop_ins, unit=unit)
    assert filters and not filters[0].startswith("~"), "the filter is expected to start as an allow list"
    allowed: set[str] = set()
    for entry in filters:
        deny = entry.startswith("~")
        items = entry.lstrip("~").split()
        names = {n for item in items for n in (syscall_set(item) if item.startswith("@") else {item})}
        allowed = allowed - names if deny else allowed | names
    return allowed


# `PID name(args…` for calls; `PID <... name resumed>` continues one already counted.
CALL = re.compile(r"^\d+\s+([a-z0-9_]+)\(")
SOCKET_FAMILY = re.compile(r"^\d+\s+socket\((AF_[A-Z0-9]+)")


def trace_exporter(directory: Path, config: Path = INSTALLED_CONFIG) -> tuple[set[str], set[str]]:
    """System calls and socket families of `lunlat serve` (the installed config, the host's /proc
    and /sys) starting, answering scrapes and stopping on SIGTERM, as systemd stops it."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (Debian: strace)")
    probe = subprocess.run(
        [strace, "-qq", "-o", "/dev/null", "true"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here: {probe.stderr.strip()}")
    trace = directory / "strace.txt"
    argv = [strace, "-f", "-qq", "-o", str(trace), sys.executable, "-m", "lunlat", "serve"]
    argv += [f"--web.listen-address={LOOPBACK}:0", f"--config.file={config}"]
    process = ExporterProcess(argv, directory / "lunlat.log", port_pattern=LUNLAT_PORT, name="lunlat")
    with process:
        for path in ("/metrics", "/metrics", "/-/healthy"):
            process.scrape(path)
        # SIGTERM to lunlat itself (strace would detach and leave it running); strace then exits.
        for child in psutil.Process(process.pid).children():
            child.terminate()
            child.wait(30)
    text = trace.read_text(encoding="utf-8", errors="replace")
    calls = {m.group(1) for m in map(CALL.match, text.splitlines()) if m}
    families = {m.group(1) for m in map(SOCKET_FAMILY.match, text.splitlines()) if m}
    assert {"openat", "bind", "accept4", "exit_group"} <= calls, f"implausible trace: {sorted(calls)}"
    return calls, families


def test_the_system_call_filter_allows_what_lunlat_does(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd)")
    calls, families = trace_exporter(tmp_path)
    assert calls - allowed_syscalls() == set(), "SystemCallFilter= would kill lunlat (SIGSYS)"
    (restricted,) = unit_values("RestrictAddressFamilies")
    assert families - set(restricted.split()) == set(), "RestrictAddressFamilies= would refuse a socket"


VMAGENT_UNIT = ROOT / "deploy" / "fleet" / "lunlat-vmagent.service"
SCRAPES = re.compile(r"^vm_promscrape_scrapes_total(?:\{[^}]*\})? (\d+)$", re.MULTILINE)


def test_the_vmagent_units_filter_allows_what_vmagent_does(tmp_path: Path) -> None:
    """deploy/fleet/lunlat-vmagent.service's SystemCallFilter= and RestrictAddressFamilies= (issue 42:
    `systemd-analyze security` found neither) let through every call and socket family of Debian's
    vmagent starting, scraping, serving its /metrics and stopping on SIGTERM, traced with strace."""
    for tool in ("systemd-analyze", "strace", "vmagent"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (Debian: systemd, strace, victoria-metrics)")
    port = free_port()
    config = tmp_path / "vmagent.yml"
    config.write_text(
        "scrape_configs:\n  - job_name: self\n    scrape_interval: 1s\n"
        f"    static_configs: [{{targets: ['{LOOPBACK}:{port}']}}]\n",
        encoding="utf-8",
    )
    trace = tmp_path / "strace.txt"
    argv = ["strace", "-f", "-qq", "-o", str(trace), "vmagent", f"-promscrape.config={config}"]
    argv += [f"-remoteWrite.url=http://{LOOPBACK}:{free_port()}/api/v1/write"]
    argv += [f"-remoteWrite.tmpDataPath={tmp_path / 'buffer'}", f"-httpListenAddr={LOOPBACK}:{port}"]
    log = (tmp_path / "vmagent.log").open("wb")
    traced = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        scraped = 0
        while not scraped:  # until vmagent has scraped itself once: a whole scrape is in the trace
            assert traced.poll() is None, (tmp_path / "vmagent.log").read_text(encoding="utf-8")
            answer = scrape(port, timeout=10) if port in listening_ports_of(traced.pid) else None
            found = SCRAPES.search(answer.text) if answer is not None and answer.status == 200 else None
            scraped = int(found.group(1)) if found else 0
            time.sleep(0.2)
        for child in psutil.Process(traced.pid).children():  # SIGTERM to vmagent, as systemd stops it
            child.terminate()
        assert traced.wait(60) == 0
    finally:
        if traced.poll() is None:
            traced.kill()
            traced.wait()
        log.close()
    lines = trace.read_text(encoding="utf-8", errors="replace").splitlines()
    calls = {m.group(1) for m in map(CALL.match, lines) if m}
    families = {m.group(1) for m in map(SOCKET_FAMILY.match, lines) if m}
    assert {"socket", "bind", "accept4", "exit_group"} <= calls, f"implausible trace: {sorted(calls)}"
    assert calls - allowed_syscalls(unit=VMAGENT_UNIT) == set(), "SystemCallFilter= would refuse vmagent"
    (restricted,) = unit_values("RestrictAddressFamilies", unit=VMAGENT_UNIT)
    assert families - set(restricted.split()) == set(), "RestrictAddressFamilies= would refuse a socket"


def listening_ports_of(pid: int) -> set[int]:
    """TCP ports `pid` or its children listen on (vmagent runs under strace)."""
    return {
        port for p in (pid, *(c.pid for c in psutil.Process(pid).children())) for port in listening_ports(p)
    }


def test_the_filter_check_would_catch_a_denied_call() -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd)")
    allowed = allowed_syscalls()
    assert {"read", "openat", "accept4", "clone3"} <= allowed
    assert not {"setrlimit", "mount", "reboot", "setuid"} & allowed  # @resources, @privileged
    # glibc's getrlimit and setrlimit both call prlimit64 (in @default): `serve` raising a lower soft
    # open-file limit (a drop-in's LimitNOFILE=1024:65536) is not killed by the filter.
    assert "prlimit64" in allowed


def test_the_newer_hardening_drop_ins_verify_clean_with_the_unit(tmp_path: Path) -> None:
    """hardening-<version>.conf (settings systemd added after 239) with the unit, under this machine's
    systemd (Debian 12: 252, newer than each): verify knows every key."""
    drop_ins = tmp_path / f"{UNIT.name}.d"
    drop_ins.mkdir()
    confs = sorted(UNIT.parent.glob("hardening-*.conf"))
    assert [c.name for c in confs] == ["hardening-242.conf", "hardening-244.conf", "hardening-245.conf"]
    for conf in confs:
        (drop_ins / conf.name).write_text(conf.read_text(encoding="utf-8"))
    assert verify(UNIT.read_text(encoding="utf-8"), tmp_path) == ""
    assert unit_values("ProtectClock", *confs) == ["yes"]


def test_the_biolatency_drop_in_verifies_and_grants_only_what_the_programs_need(tmp_path: Path) -> None:
    drop_ins = tmp_path / f"{UNIT.name}.d"
    drop_ins.mkdir()
    (drop_ins / BIOLATENCY_DROP_IN.name).write_text(BIOLATENCY_DROP_IN.read_text(encoding="utf-8"))
    assert verify(UNIT.read_text(encoding="utf-8"), tmp_path) == ""  # verify reads <unit>.d/ beside it
    for key in ("CapabilityBoundingSet", "AmbientCapabilities"):
        assert unit_values(key, BIOLATENCY_DROP_IN) == ["", "CAP_BPF CAP_PERFMON"], key
    # libbpf raises RLIMIT_MEMLOCK to infinity on kernels before 5.11 (prlimit64, in @default): the
    # unit, without CAP_SYS_RESOURCE, may raise it only up to the hard limit the drop-in sets.
    assert unit_values("LimitMEMLOCK", BIOLATENCY_DROP_IN) == ["infinity"]
    allowed = allowed_syscalls(BIOLATENCY_DROP_IN)
    assert allowed - allowed_syscalls() == {"bpf"}
    assert "prlimit64" in allowed
    assert not {"setrlimit", "mount", "reboot", "setuid"} & allowed


def test_the_drop_in_filter_allows_what_biolatency_does(tmp_path: Path) -> None:
    """`lunlat serve` with the per-I/O histograms on (as root here: the drop-in's capabilities are
    what the programs need instead, docs/deploy/systemd.md), traced: every call within the unit plus the drop-in."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd)")
    from lunlat.sources.biolatency import unavailable_cause  # noqa: PLC0415 - only this test needs it

    cause = unavailable_cause()
    if cause is not None:
        pytest.skip(f"biolatency cannot load here: {cause}")
    config = tmp_path / "lunlat.yaml"
    config.write_text(INSTALLED_CONFIG.read_text(encoding="utf-8") + "\nbiolatency: {enabled: true}\n")
    calls, _families = trace_exporter(tmp_path, config)
    assert "bpf" in calls, "the programs were not loaded"
    assert calls - allowed_syscalls(BIOLATENCY_DROP_IN) == set(), "SystemCallFilter= would kill lunlat"


# --- the unit holds to systemd 239 (RHEL 8) -------------------------------------------------------


def _known_239() -> tuple[set[str], set[str]]:
    lines = [line.strip() for line in DIRECTIVES_239.read_text(encoding="utf-8").splitlines()]
    entries = [line for line in lines if line and not line.startswith("#")]
    return {e for e in entries if not e.startswith("@")}, {e for e in entries if e.startswith("@")}


def _settings(path: Path) -> list[tuple[str, str, str]]:
    """(section, key, value) of every setting of a unit file or drop-in, repeated keys kept."""
    settings, section = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            section = line.strip("[] ")
        elif line.strip() and not line.lstrip().startswith(("#", ";")):
            key, _, value = line.partition("=")
            settings.append((section, key.strip(), value.strip()))
    return settings


def test_the_directive_list_is_systemd_239s() -> None:
    """The stored list is what it says: settings 239 added are in it, ones added later are not
    (systemd NEWS: RestrictNamespaces= 233, LockPersonality= 235; ProtectHostname= 242,
    ProtectKernelLogs= 244, LoadCredential= 247)."""
    known, groups = _known_239()
    assert {"Service.RestrictNamespaces", "Service.LockPersonality", "Service.ProtectSystem"} <= known
    assert not {"Service.ProtectHostname", "Service.ProtectKernelLogs", "Service.LoadCredential"} & known
    assert "@system-service" in groups and len(known) > 250


def test_every_setting_of_the_unit_is_one_systemd_239_knows() -> None:
    known, groups = _known_239()
    shipped = [UNIT, ROOT / "deploy" / "packages" / "runtime.conf"]
    unknown = [f"{p.name}: {s}.{k}" for p in shipped for s, k, _ in _settings(p) if f"{s}.{k}" not in known]
    assert unknown == []
    filters = [v for s, k, v in _settings(UNIT) if k == "SystemCallFilter"]
    named = {
        word.lstrip("~") for value in filters for word in value.split() if word.lstrip("~").startswith("@")
    }
    assert named and named <= groups


@pytest.mark.parametrize("version", [242, 244, 245])
def test_each_newer_drop_in_states_its_minimum_and_holds_only_what_239_lacks(version: int) -> None:
    drop_in = UNIT.with_name(f"hardening-{version}.conf")
    known, _ = _known_239()
    assert f"# minimum systemd: {version}\n" in drop_in.read_text(encoding="utf-8")
    settings = _settings(drop_in)
    assert settings and all(section == "Service" for section, _, _ in settings)
    assert not {f"Service.{key}" for _, key, _ in settings} & known
    news = Path("/usr/share/doc/systemd/NEWS.gz")
    if news.exists():  # systemd's NEWS as Debian ships it: each setting is announced in that version
        sections = re.split(r"^CHANGES WITH (\d+):", gzip.decompress(news.read_bytes()).decode(), flags=re.M)
        text = dict(zip(sections[1::2], sections[2::2], strict=True))[str(version)]
        assert all(f"{key}=" in text for _, key, _ in settings)
