"""docker-compose.yml: valid with and without each profile, images pinned, mounted files present,
the configs it mounts valid where they are mounted (promtool), Grafana the dashboards' version."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lunlat.configfile import load_config
from lunlat.engines.mssql import ENGINE as MSSQL_ENGINE
from lunlat.engines.oracle import ENGINE as ORACLE_ENGINE
from tests.support.compose_config import bind_mounts, compose_config
from tests.support.skip_unless_installed import need

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ((), ("oracle",), ("mssql",), ("lab",), ("oracle", "mssql", "lab"))


@pytest.mark.parametrize("profiles", PROFILES)
def test_every_profile_is_valid_and_pins_its_images(profiles: tuple[str, ...]) -> None:
    services = compose_config(*profiles)["services"]
    assert set(profiles) <= set(services)
    for name, service in services.items():
        image = service.get("image", "")
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        assert tag and tag != "latest", f"{name}: image {image!r} is not pinned to a version"


def test_the_oracle_profile_mounts_files_that_exist_and_configs_that_load() -> None:
    services = compose_config("oracle")["services"]
    for service in ("exporter", "oracle"):
        for volume in services[service].get("volumes", []):
            source = volume.split(":", 1)[0]  # `config` prints short syntax, bind sources absolute
            if source.startswith(str(ROOT)):
                assert Path(source).exists(), f"{service} mounts {source}, which the repository lacks"
    oracle = load_config(ROOT / "deploy" / "oracle" / "lunlat.yaml").targets(ORACLE_ENGINE)
    assert [t.dsn for t in oracle] == ["oracle:1521/FREEPDB1"]
    assert load_config(ROOT / "deploy" / "lunlat" / "host.yaml").targets(ORACLE_ENGINE) == []
    # The setup script itself is tested in tests/oracle/test_deploy.py.


def test_the_mssql_profile_mounts_files_that_exist_and_its_config_loads() -> None:
    services = compose_config("mssql")["services"]
    for service in ("mssql", "mssql-setup"):
        for volume in services[service].get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith(str(ROOT)):
                assert Path(source).exists(), f"{service} mounts {source}, which the repository lacks"
    (target,) = load_config(ROOT / "deploy" / "mssql" / "lunlat.yaml").targets(MSSQL_ENGINE)
    assert (target.server, target.driver) == ("mssql,1433", "FreeTDS")  # the driver the image carries
    assert "tdsodbc" in (ROOT / "exporter" / "Dockerfile").read_text()
    setup = (ROOT / "deploy" / "mssql" / "setup.sh").read_text()
    assert "/opt/lunlat/grants.sql" in setup and "mssql_lunlat_password" in setup


@pytest.mark.parametrize("profile", ["oracle", "mssql"])
def test_the_database_profiles_map_the_container_through_a_read_only_socket_proxy(profile: str) -> None:
    """The exporter names the database's container (its container_name) and reaches the engine only
    through the profile's proxy, which lets GET on containers through and nothing that writes."""
    services = compose_config(profile)["services"]
    config = load_config(ROOT / "deploy" / profile / "lunlat.yaml")
    (target,) = config.targets(ORACLE_ENGINE) if profile == "oracle" else config.targets(MSSQL_ENGINE)
    assert target.container == services[profile]["container_name"]
    assert config.docker is not None and config.docker.url == "tcp://docker-socket-proxy:2375"
    proxy = services["docker-socket-proxy"]
    assert proxy["environment"] == {"CONTAINERS": "1", "POST": "0"}
    assert [v for v in proxy["volumes"] if "docker.sock" in str(v)] == [
        "/var/run/docker.sock:/var/run/docker.sock:ro"
    ]
    assert "ports" not in proxy
    assert not any("docker.sock" in str(v) for v in services["exporter"].get("volumes", []))
    assert "docker]" in (ROOT / "exporter" / "Dockerfile").read_text()  # the SDK is in the image


def test_every_bind_mount_of_the_repository_exists() -> None:
    """Credentials aside (deploy/secrets/ holds only READMEs in a checkout), every file and folder a
    service mounts from the repository is in it."""
    services = compose_config("oracle", "mssql", "lab")["services"]
    for name, service in services.items():
        for target, source in bind_mounts(service).items():
            if source.is_relative_to(ROOT) and not source.is_relative_to(ROOT / "deploy" / "secrets"):
                assert source.exists(), f"{name} mounts {source} at {target}: not in the repository"
    assert (ROOT / "deploy" / "secrets" / "alertmanager" / "README.md").exists()  # the folder exists


def test_prometheus_config_is_valid_where_it_is_mounted(tmp_path: Path) -> None:
    """promtool checks deploy/prometheus/prometheus.yml with its rule file at the path compose
    mounts alerts/lunlat.rules.yml: a moved mount or a renamed file fails here."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: prometheus)")
    prometheus = compose_config()["services"]["prometheus"]
    mounted = bind_mounts(prometheus)
    config_path = next(
        arg.split("=", 1)[1] for arg in prometheus["command"] if arg.startswith("--config.file=")
    )
    config = yaml.safe_load(mounted[config_path].read_text(encoding="utf-8"))
    config["rule_files"] = [str(mounted[rule]) for rule in config["rule_files"]]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = subprocess.run(
        [promtool, "check", "config", str(local)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rule files found" in done.stdout
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["lunlat"]["static_configs"][0]["targets"] == ["exporter:10431"]
    assert config["global"]["scrape_interval"] == "15s"
    # The rules' selector names this job.
    assert 'job="lunlat"' in (ROOT / "alerts" / "goals.yaml").read_text(encoding="utf-8")


def test_alertmanager_gets_the_repositorys_config_and_its_secret_folder() -> None:
    alertmanager = bind_mounts(compose_config()["services"]["alertmanager"])
    assert alertmanager["/etc/alertmanager/alertmanager.yml"] == ROOT / "alerts" / "alertmanager.yml"
    secrets = alertmanager["/etc/alertmanager/secrets"]
    config = (ROOT / "alerts" / "alertmanager.yml").read_text(encoding="utf-8")
    for used in re.findall(r"_file: (/etc/alertmanager/secrets/[\w-]+)", config):
        assert used.rsplit("/", 1)[1] in (secrets / "README.md").read_text(encoding="utf-8"), used


def test_grafana_runs_the_dashboards_version_with_them_provisioned() -> None:
    GRAFANA_VERSION = need("lunlat_dashboards").GRAFANA_VERSION  # noqa: N806 - the generator's constant

    grafana = compose_config()["services"]["grafana"]
    assert grafana["image"] == f"grafana/grafana:{GRAFANA_VERSION}"
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    mounted = bind_mounts(grafana)
    provisioning = mounted["/etc/grafana/provisioning"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "lunlat.yaml").read_text())["providers"]
    assert mounted[provider["options"]["path"]] == ROOT / "dashboards"
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())[
        "datasources"
    ]
    assert datasource["type"] == "prometheus" and datasource["isDefault"] is True
    assert datasource["url"] == "http://prometheus:9090"
    env = (ROOT / "deploy" / "grafana" / "grafana.env.example").read_text(encoding="utf-8")
    assert "GF_SECURITY_ADMIN_PASSWORD=" in env
    assert "deploy/secrets/grafana.env" in grafana_env_default()


def grafana_env_default() -> str:
    """The env file compose reads without LUNLAT_GRAFANA_ENV (git-ignored, in deploy/secrets/)."""
    text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    match = re.search(r"\$\{LUNLAT_GRAFANA_ENV:-([^}]+)\}", text)
    assert match, "grafana's env_file is not ${LUNLAT_GRAFANA_ENV:-...}"
    return match.group(1)


def test_the_lab_profile_runs_the_lab_with_its_config() -> None:
    lab = compose_config("lab")["services"]["lab"]
    assert lab["build"]["target"] == "lab" and lab["privileged"] is True
    assert Path(lab["build"]["context"]) == ROOT and lab["build"]["dockerfile"] == "lab/Dockerfile"
    mounted = bind_mounts(lab)
    script = mounted["/opt/lunlat/run.sh"].read_text(encoding="utf-8")
    # The description shipped with the lab: no file of the checkout mounted for it.
    assert "\nlunlat-lab up\n" in script and "lunlat-lab down" in script
    assert all(not path.name.endswith(".yaml") for path in mounted.values())
    assert os.access(mounted["/opt/lunlat/run.sh"], os.X_OK)
    dockerfile = (ROOT / "lab" / "Dockerfile").read_text(encoding="utf-8")
    assert "AS lab" in dockerfile and "libfuse3-dev" in dockerfile


def test_the_exporters_image_holds_no_lab() -> None:
    dockerfile = (ROOT / "exporter" / "Dockerfile").read_text(encoding="utf-8")
    assert "AS lab" not in dockerfile and "mfusepy" not in dockerfile and "fio" not in dockerfile
    assert compose_config()["services"]["exporter"]["build"]["target"] == "exporter"


def test_the_lab_profile_documents_the_exporter_config_generated_for_the_lab() -> None:
    """The exporter reads ordinary `luns:` entries, never the lab description: compose's lab profile
    names the generated config, which loads and labels every lab LUN by its image file."""
    text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    assert "LUNLAT_CONFIG=./deploy/lab/lunlat.yaml docker compose --profile lab" in text
    assert "LUNLAT_CONFIG=./deploy/lab/lab.yaml" not in text
    config = load_config(ROOT / "deploy" / "lab" / "lunlat.yaml")
    lab_file = need("lunlat_lab.defaults").DEFAULT_LAB_FILE
    lab_luns = yaml.safe_load(lab_file.read_text(encoding="utf-8"))["luns"]
    assert [entry.match.loop_file for entry in config.luns] == [f"{lun['name']}.img" for lun in lab_luns]


def test_the_fleet_configs_are_valid() -> None:
    """deploy/fleet: the central compose file validates; the Prometheus agent config passes promtool
    in agent mode (vmagent.yml itself runs in tests/deploy/test_fleet.py)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: prometheus)")
    fleet = ROOT / "deploy" / "fleet"
    services = compose_config(file=fleet / "docker-compose.yml")["services"]
    assert (
        bind_mounts(services["vmalert"])["/etc/lunlat/lunlat.rules.yml"]
        == ROOT / "alerts" / "lunlat.rules.yml"
    )
    for name, service in services.items():
        assert ":" in service["image"] and not service["image"].endswith(":latest"), name
    agent = subprocess.run(
        [promtool, "check", "config", "--agent", str(fleet / "prometheus-agent.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert agent.returncode == 0, agent.stdout + agent.stderr
    for config in ("prometheus-agent.yml", "vmagent.yml"):
        relabel = yaml.safe_load((fleet / config).read_text())["scrape_configs"][0]["relabel_configs"]
        assert {"target_label": "instance"}.items() <= relabel[0].items(), config
