"""Images and a compose engine for the stack test (tests/deploy/test_stack.py), with Debian packages only:
podman and runc run the containers, mmdebstrap makes the base image from Debian's archive (no image
registry is reachable where lunlat is built), docker-compose v1 talks to `podman system service`.

Every podman call gets the test's own containers.conf (CONTAINERS_CONF: "just this path will be used",
containers.conf(5)); the machine's configuration is left alone. Base images are cached between runs
in podman's storage, under a tag that is a digest of their recipe: a changed recipe builds a new one.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# The test's Debian base: python3 (bookworm: 3.11, what the exporter needs) and its venv module
# (exporter/Dockerfile installs into a venv), CA certificates for pip's and apt's TLS.
SUITE = "bookworm"
BASE_NAME = "lunlat-test-base-python"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
# Certificates a host adds to its trust store live here (update-ca-certificates(8)); where egress
# passes through a TLS-inspecting proxy its CA is one of them, and pip in the image build needs it.
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
# pip reads every option from PIP_<OPTION> (pip docs, "Environment Variables"); --cert is the CA
# bundle, here the system's, which update-ca-certificates writes (pip 23's own bundle is certifi's).
BASE_ENV = {"PIP_CERT": "/etc/ssl/certs/ca-certificates.crt"}

# Debian package of each program the test needs, for the skip reason.
TOOLS = {
    "podman": "podman",
    "runc": "runc",
    "mmdebstrap": "mmdebstrap",
    "docker-compose": "docker-compose",
}


def missing_tool() -> str | None:
    """The skip reason when a program the stack test needs is not installed, else None."""
    for tool, package in TOOLS.items():
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: {package})"
    return None


def containers_conf(path: Path) -> Path:
    """The test's containers.conf: runc, and ulimits this host can grant.

    runc, not crun: crun refuses a host whose cgroup v2 hierarchy holds controllers beside v1 ones
    ("cgroups in hybrid mode not supported", crun 1.8.1, measured), runc runs there and on pure v1
    and v2 hosts alike (podman's runtime list, containers.conf(5) `runtime`).
    Ulimits: without a setting podman gives every container nofile and nproc 1048576
    (containers/podman docs/source/markdown/options/ulimit.md; clamped to the hard limit for rootless
    users only). A rootful podman on a host whose hard limits are lower fails every container with
    "setrlimit RLIMIT_NOFILE: Operation not permitted" (measured). The host's hard limits fit; nproc
    no higher than kernel.pid_max, which the kernel here also refused to exceed (measured).
    """
    _, nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    _, nproc = resource.getrlimit(resource.RLIMIT_NPROC)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text(encoding="ascii"))
    nproc = pid_max if nproc == resource.RLIM_INFINITY else min(nproc, pid_max)
    nofile = 1048576 if nofile == resource.RLIM_INFINITY else nofile
    path.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        "[engine]\n"
        'runtime = "runc"\n',
        encoding="utf-8",
    )
    return path


@dataclass(frozen=True, slots=True)
class Podman:
    """podman with the test's containers.conf."""

    conf: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["podman", *args], capture_output=True, text=True, env=self.env, check=False, timeout=timeout
        )
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return done

    def image_exists(self, image: str) -> bool:
        return self.run("image", "exists", image, check=False).returncode == 0

    def build(self, containerfile: Path, context: Path, target: str, tag: str, base: str) -> str:
        """podman build in the Docker format (the OCI format drops HEALTHCHECK: containers/buildah
        config.go, SetHealthcheck); its layer cache makes an unchanged rebuild quick."""
        self.run(
            "build", "--format", "docker", "-f", str(containerfile), "--target", target,
            "--build-arg", f"BASE={base}", "-t", tag, str(context),
        )  # fmt: skip
        return tag


def _recipe_digest() -> str:
    """What the base is made of: the suite, the packages, the host's extra CAs, the image's env."""
    recipe = hashlib.sha256()
    recipe.update(repr((SUITE, BASE_PACKAGES, sorted(BASE_ENV.items()))).encode())
    for ca in sorted(LOCAL_CAS.glob("**/*.crt")):
        recipe.update(ca.read_bytes())
    return recipe.hexdigest()[:12]


def base_image(podman: Podman, log: Path) -> str:
    """The test's Debian base image (`lunlat-test-base-python:<recipe digest>`), made once with
    `mmdebstrap --variant=minbase` piped into `podman import` (about 40 s here) and cached.

    mmdebstrap(1): with `-` as target it writes a tarball to stdout; customize hooks run after the
    packages are installed, `copy-in` copies host files into the chroot. podman-import(1) `--change`
    applies Dockerfile instructions (ENV, CMD) to the imported image.
    """
    tag = f"{BASE_NAME}:{_recipe_digest()}"
    if podman.image_exists(tag):
        return tag
    hooks: list[str] = []
    if any(LOCAL_CAS.glob("**/*.crt")):
        hooks += [
            f"--customize-hook=copy-in {LOCAL_CAS} {LOCAL_CAS.parent}",
            '--customize-hook=chroot "$1" update-ca-certificates',
        ]
    changes = [f"--change=ENV {k}={v}" for k, v in BASE_ENV.items()] + ['--change=CMD ["/bin/bash"]']
    include = f"--include={','.join(BASE_PACKAGES)}"
    with log.open("wb") as messages:
        debstrap = subprocess.Popen(
            ["mmdebstrap", "--variant=minbase", include, *hooks, SUITE, "-"],
            stdout=subprocess.PIPE,
            stderr=messages,
        )
        assert debstrap.stdout is not None
        imported = subprocess.run(
            ["podman", "import", *changes, "-", tag],
            stdin=debstrap.stdout,
            capture_output=True,
            text=True,
            env=podman.env,
            check=False,
            timeout=900,
        )
        debstrap.stdout.close()
        debstrap.wait(900)
    tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
    assert debstrap.returncode == 0, f"mmdebstrap exited {debstrap.returncode}:\n{tail}"
    assert imported.returncode == 0, f"podman import failed:\n{imported.stderr[-3000:]}"
    return tag


def prune_leftovers(podman: Podman) -> list[str]:
    """Remove the untagged leaf images built on the test's base (a build stage's result, an image a
    rebuild untagged) so that repeated runs do not fill the disk; returns their ids. podman's
    `dangling=true` lists images "no longer referenced by any image" (podman-images(1)), so the
    layer cache of the tagged images stays; images not built on the test's base are left alone."""
    listed = podman.run("images", "--quiet", "--no-trunc", "--filter", "dangling=true").stdout.split()
    ours = []
    for image in listed:
        history = podman.run("image", "inspect", "--format", "{{json .History}}", image, check=False).stdout
        if f"FROM localhost/{BASE_NAME}:" in history:
            ours.append(image)
    for image in ours:
        podman.run("rmi", image, check=False)  # a build running beside this one may hold it: no matter
    return ours


@contextmanager
def podman_service(podman: Podman, workdir: Path) -> Iterator[Mapping[str, str]]:
    """`podman system service` on a socket of its own (podman-system-service(1): `--time=0` never
    times out); yields the environment docker-compose needs (DOCKER_HOST). Stopped on exit."""
    sock = workdir / "podman.sock"
    log = (workdir / "podman-service.log").open("wb")
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{sock}"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=podman.env,
    )
    try:
        deadline = time.monotonic() + 30
        while not _answers(sock):
            assert service.poll() is None, (workdir / "podman-service.log").read_text(errors="replace")
            assert time.monotonic() < deadline, "podman system service did not answer within 30 s"
            time.sleep(0.2)
        yield {**podman.env, "DOCKER_HOST": f"unix://{sock}"}
    finally:
        service.terminate()
        try:
            service.wait(15)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
        log.close()


def _answers(sock: Path) -> bool:
    """The Docker API's ping (GET /_ping → OK) over the unix socket."""
    if not sock.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        try:
            client.connect(str(sock))
            client.sendall(b"GET /_ping HTTP/1.0\r\nHost: podman\r\n\r\n")
            return b"OK" in client.recv(4096)
        except OSError:
            return False


def free_port() -> int:
    """A TCP port free on the loopback now (the kernel's pick), for a container's published port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
