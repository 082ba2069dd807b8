"""deploy/helm/lunlat: `helm lint --strict` clean; what `helm template` renders, with the default values
and with every optional part on (ci/all-values.yaml), accepted by kubeconform -strict against offline
schemas (kubernetes-validate's for core kinds, the vendored prometheus-operator ones for the custom
resources); the DaemonSet the one deploy/kubernetes/daemonset.yaml describes; values.schema.json
covering every value and refusing bad ones; the rules and dashboards the generated ones, byte for byte.

Skips with the reason where helm or kubeconform is missing (.ci/run installs both with `go install`);
in CI (CI set) a missing tool fails instead, as tests/guest/guest.py's kernel_or_skip does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy.test_image_tag import TAG
from tests.deploy.test_kubernetes import CUSTOM, KUBE, KUBERNETES_VERSION, problems

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "lunlat"
ALL_ON = CHART / "ci" / "all-values.yaml"
INSTALL = {
    "helm": "go install helm.sh/helm/v3/cmd/helm@v3.22.0",
    "kubeconform": "go install github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0",
}


@cache
def _find(name: str) -> str | None:
    found = shutil.which(name)
    if found is None and (go := shutil.which("go")) is not None:
        gopath = subprocess.run([go, "env", "GOPATH"], capture_output=True, text=True, check=False)
        candidate = Path(gopath.stdout.strip()) / "bin" / name
        found = str(candidate) if gopath.stdout.strip() and candidate.is_file() else None
    return found


def tool(name: str) -> str:
    """The tool's path; where it is missing the test skips saying how to install it, or fails in CI."""
    found = _find(name)
    if found is None:
        message = f"{name} is not installed ({INSTALL[name]})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)


def template(*values: str) -> str:
    done = run(tool("helm"), "template", "lunlat", str(CHART), "--namespace", "lunlat", *values)
    assert done.returncode == 0, done.stderr
    return done.stdout


def documents(*values: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(template(*values)) if doc]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = (doc for doc in docs if doc["kind"] == kind)
    return found


CASES = {"default": (), "all-on": ("--values", str(ALL_ON))}


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kubernetes-validate's strict schemas, laid out for kubeconform. Each names itself with an `$id`
    under https://kubernetes.io/api/ and refers to `/api/_definitions.json`, which a schema registry
    resolves in Python (kubernetes_validate/utils.py) but kubeconform would fetch from the network:
    here each kind's file loses its `$id` and points at the `_definitions.json` beside it."""
    tool("kubeconform")  # skips (or fails in CI) before the copying
    source = (
        Path(kubernetes_validate.__file__).parent
        / "kubernetes-json-schema"
        / f"v{KUBERNETES_VERSION}-local-strict"
    )
    target = tmp_path_factory.mktemp("kubernetes-schemas")
    shutil.copyfile(source / "_definitions.json", target / "_definitions.json")
    for path in source.glob("*.json"):
        if path.name == "_definitions.json":
            continue
        text = path.read_text(encoding="utf-8").replace('"/api/_definitions.json#', '"_definitions.json#')
        schema = json.loads(text)
        schema.pop("$id", None)
        (target / path.name).write_text(json.dumps(schema), encoding="utf-8")
    return target


def kubeconform(schemas: Path, manifests: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(manifests, encoding="utf-8")
    return run(
        tool("kubeconform"),
        "-strict",
        "-summary",
        "-kubernetes-version",
        KUBERNETES_VERSION,
        # kubeconform's template variables: github.com/yannh/kubeconform README, "Overriding schemas location".
        "-schema-location",
        f"{schemas}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json",
        "-schema-location",
        f"{KUBE / 'schemas'}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json",
        str(rendered),
    )


@pytest.mark.parametrize("values", ["default", str(ALL_ON)])
def test_helm_lint_is_clean(values: str) -> None:
    extra = () if values == "default" else ("--values", values)
    done = run(tool("helm"), "lint", "--strict", str(CHART), *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout


@pytest.mark.parametrize("case", CASES)
def test_rendered_manifests_pass_kubeconform_strict(case: str, schemas: Path, tmp_path: Path) -> None:
    manifests = template(*CASES[case])
    done = kubeconform(schemas, manifests, tmp_path)
    kinds = [doc["kind"] for doc in yaml.safe_load_all(manifests) if doc]
    assert done.returncode == 0, done.stdout + done.stderr
    # Every resource validated, none skipped for want of a schema.
    assert f"Valid: {len(kinds)}, Invalid: 0, Errors: 0, Skipped: 0" in done.stdout, done.stdout


def test_kubeconform_would_catch_mistakes(schemas: Path, tmp_path: Path) -> None:
    manifests = template(*CASES["all-on"])
    for wrong in ("readOnly: true}", "interval: 15s"):
        assert wrong in manifests
    misspelt = manifests.replace("readOnly: true}", "readonly: true}", 1)
    assert kubeconform(schemas, misspelt, tmp_path).returncode != 0
    bad_crd = manifests.replace("interval: 15s", "interval: fifteen seconds", 1)
    assert kubeconform(schemas, bad_crd, tmp_path).returncode != 0


def test_custom_resources_have_no_unknown_field() -> None:
    """kubeconform leaves the CRDs' objects open; test_kubernetes.problems closes them."""
    docs = documents(*CASES["all-on"])
    custom = [doc for doc in docs if (doc["apiVersion"], doc["kind"]) in CUSTOM]
    assert {doc["kind"] for doc in custom} == {"ServiceMonitor", "PrometheusRule"}
    for doc in custom:
        assert problems(doc) == [], doc["kind"]


def test_only_the_core_parts_are_on_by_default() -> None:
    assert sorted(doc["kind"] for doc in documents()) == [
        "ConfigMap",
        "DaemonSet",
        "Service",
        "ServiceAccount",
    ]


@cache
def plain_daemonset() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((KUBE / "daemonset.yaml").read_text(encoding="utf-8"))
    return found


@pytest.mark.parametrize("case", CASES)
def test_the_daemonset_is_the_plain_manifests_one(case: str) -> None:
    docs = documents(*CASES[case])
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    plain_pod = plain_daemonset()["spec"]["template"]["spec"]
    (container,), (plain,) = pod["containers"], plain_pod["containers"]
    assert container["args"][: len(plain["args"])] == plain["args"]
    for key in ("ports", "readinessProbe", "livenessProbe"):
        assert container[key] == plain[key], key
    # The plain manifest's mounts; the credentials only where a Secret is named (all-on).
    expected = [m for m in plain["volumeMounts"] if case == "all-on" or m["name"] != "credentials"]
    assert container["volumeMounts"] == expected
    # The node's /proc, /sys and /dev, read-only, as in the plain manifest; every mount read-only.
    assert all(mount["readOnly"] for mount in container["volumeMounts"])
    host = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    assert host == {v["name"]: v["hostPath"] for v in plain_pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert {name: mounts[name] for name in host} == {"proc": "/host/proc", "sys": "/host/sys", "dev": "/dev"}
    assert container["resources"]["limits"].keys() >= {"cpu", "memory"} and container["resources"]["requests"]
    # Non-root pod, its own ServiceAccount without a token, the plain manifest's user and group.
    security = pod["securityContext"]
    assert {key: security[key] for key in plain_pod["securityContext"]} == plain_pod["securityContext"]
    assert pod["automountServiceAccountToken"] is False
    account = one(docs, "ServiceAccount")
    assert (
        pod["serviceAccountName"] == account["metadata"]["name"]
        and account["automountServiceAccountToken"] is False
    )
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    if case == "default":
        assert container["securityContext"] == plain["securityContext"]
        assert container["image"] == plain["image"]  # lunlat:<appVersion>, the image deploy/image/build tags


def test_biolatency_adds_its_two_capabilities_and_its_flag() -> None:
    pod = one(documents(*CASES["all-on"]), "DaemonSet")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--collector.biolatency" in container["args"]
    # User 0 holding these two capabilities alone: a non-root user would keep them only in its
    # bounding set (kubernetes/kubernetes#56374); no escalation, read-only root as without biolatency.
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": ["BPF", "PERFMON"]},
        "runAsNonRoot": False,
        "runAsUser": 0,
    }
    assert container["image"].endswith("@sha256:" + "0" * 64)


def test_the_credentials_secret_is_referenced_and_group_readable() -> None:
    docs = documents(*CASES["all-on"])
    assert "Secret" not in {doc["kind"] for doc in docs}  # by reference: the chart makes none
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    secret = next(v["secret"] for v in pod["volumes"] if "secret" in v)
    assert secret == {"secretName": "lunlat-db-credentials", "defaultMode": 0o440}
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"] == 10431
    plain = next(
        v["secret"] for v in plain_daemonset()["spec"]["template"]["spec"]["volumes"] if "secret" in v
    )
    assert (
        plain["defaultMode"] == 0o440
        and plain_daemonset()["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 10431
    )


def test_the_config_map_holds_the_config_values() -> None:
    all_on = yaml.safe_load(ALL_ON.read_text(encoding="utf-8"))
    (found,) = (doc for doc in documents(*CASES["all-on"]) if "lunlat.yaml" in doc.get("data", {}))
    assert yaml.safe_load(found["data"]["lunlat.yaml"]) == all_on["config"]
    (default,) = (doc for doc in documents() if doc["kind"] == "ConfigMap")
    plain = yaml.safe_load((KUBE / "configmap.yaml").read_text(encoding="utf-8"))
    assert yaml.safe_load(default["data"]["lunlat.yaml"]) == yaml.safe_load(plain["data"]["lunlat.yaml"])


def test_the_service_monitor_scrapes_as_job_lunlat_named_by_node() -> None:
    docs = documents(*CASES["all-on"])
    service, monitor = one(docs, "Service"), one(docs, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "lunlat"  # the rules' job="lunlat"
    (endpoint,) = monitor["spec"]["endpoints"]
    plain = yaml.safe_load((KUBE / "servicemonitor.yaml").read_text(encoding="utf-8"))["spec"]["endpoints"][0]
    assert endpoint == plain


def test_the_prometheus_rule_is_the_generated_one() -> None:
    rule = one(documents(*CASES["all-on"]), "PrometheusRule")
    generated = yaml.safe_load((KUBE / "prometheusrule.yaml").read_text(encoding="utf-8"))
    assert rule["spec"] == generated["spec"]
    assert (CHART / "files" / "lunlat.rules.yml").read_bytes() == (
        ROOT / "alerts" / "lunlat.rules.yml"
    ).read_bytes()


def dashboards() -> Iterator[Path]:
    return iter(sorted((ROOT / "dashboards").glob("*.json")))


def test_the_dashboards_are_the_generated_ones_labelled_for_the_sidecar() -> None:
    maps = [
        doc
        for doc in documents(*CASES["all-on"])
        if doc["kind"] == "ConfigMap" and "lunlat.yaml" not in doc["data"]
    ]
    rendered = {name: text for doc in maps for name, text in doc["data"].items()}
    expected = {path.name: path.read_text(encoding="utf-8") for path in dashboards()}
    assert expected and rendered == expected  # byte for byte
    for path in dashboards():
        assert (CHART / "files" / "dashboards" / path.name).read_bytes() == path.read_bytes()
    for doc in maps:
        assert (
            doc["metadata"]["labels"]["grafana_dashboard"] == "1"
            and doc["metadata"]["namespace"] == "monitoring"
        )


def test_the_schema_refuses_a_bad_value_clearly() -> None:
    done = run(tool("helm"), "template", "lunlat", str(CHART), "--set", "service.port=metrics")
    assert done.returncode != 0
    assert "at '/service/port': got string, want integer" in done.stderr, done.stderr
    done = run(tool("helm"), "template", "lunlat", str(CHART), "--set", "serviceMonitor.intervl=15s")
    assert done.returncode != 0 and "'intervl' not allowed" in done.stderr, done.stderr
    done = run(tool("helm"), "template", "lunlat", str(CHART), "--set", "image.digest=latest")
    assert done.returncode != 0 and "/image/digest" in done.stderr, done.stderr


def _uncovered(values: Any, schema: dict[str, Any], where: str) -> Iterator[str]:
    if not isinstance(values, dict) or "properties" not in schema:
        return
    for key, value in values.items():
        if key not in schema["properties"]:
            yield f"{where}{key}"
        else:
            yield from _uncovered(value, schema["properties"][key], f"{where}{key}.")


def test_the_schema_covers_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert list(_uncovered(values, schema, "")) == []
    assert set(schema["properties"]) == set(values)


def test_the_chart_names_the_version_the_image_build_tags() -> None:
    """Without helm: the default image, lunlat:<appVersion>, is the tag deploy/image/build makes."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert f"lunlat:{chart['appVersion']}" == TAG


@pytest.mark.parametrize("values", [CHART / "values.yaml", ALL_ON], ids=["default", "all-on"])
def test_the_config_values_are_valid_exporter_configs(values: Path) -> None:
    """Without helm: the `config` value against the exporter config's JSON schema (docs/reference)."""
    schema = json.loads(
        (ROOT / "docs" / "reference" / "lunlat-config.schema.json").read_text(encoding="utf-8")
    )
    jsonschema.validate(yaml.safe_load(values.read_text(encoding="utf-8"))["config"], schema)
