"""deploy/kubernetes: every manifest valid against offline schemas (kubernetes-validate for core
kinds, the vendored prometheus-operator schemas for the custom resources), the PrometheusRule
generated and fresh, and the DaemonSet as unprivileged and read-only as docs/deploy/kubernetes.md says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import bcrypt
import jsonschema
import kubernetes_validate
import pytest
import yaml

from lunlat.goals import load_goals
from lunlat.web import config as webconfig
from tests.support.skip_unless_installed import need

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.37.0"
CUSTOM = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): KUBE / "schemas" / "servicemonitor_v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): KUBE / "schemas" / "prometheusrule_v1.json",
}


def manifests() -> list[tuple[str, dict[str, Any]]]:
    files = sorted(p for p in KUBE.glob("*.yaml") if p.name != "kustomization.yaml")
    return [(p.name, doc) for p in files for doc in yaml.safe_load_all(p.read_text(encoding="utf-8")) if doc]


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused, as the API server's strict field validation (kubectl's
    default) refuses them: CRD schemas list their fields but leave `additionalProperties` open,
    so a misspelt field would otherwise pass. Objects that keep unknown fields on purpose
    (`x-kubernetes-preserve-unknown-fields`) or are maps (`additionalProperties`) stay open."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed


def problems(resource: dict[str, Any]) -> list[str]:
    """Why `resource` is invalid for its schema (empty when valid)."""
    custom = CUSTOM.get((resource["apiVersion"], resource["kind"]))
    if custom is not None:
        schema = strict(json.loads(custom.read_text(encoding="utf-8")))
        validator = jsonschema.Draft4Validator(schema)
        return [
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(resource)
        ]
    try:
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'.'.join(map(str, exc.path))}: {exc.message}"]
    return []


def by_kind() -> dict[str, dict[str, Any]]:
    """The applied manifests by kind (the *.example.yaml files are validated, not applied)."""
    return {doc["kind"]: doc for name, doc in manifests() if not name.endswith(".example.yaml")}


def test_kustomization_lists_every_manifest_but_the_examples() -> None:
    listed = yaml.safe_load((KUBE / "kustomization.yaml").read_text(encoding="utf-8"))["resources"]
    present = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == {name for name in present if not name.endswith(".example.yaml")}


def test_the_web_config_example_is_a_valid_web_config(tmp_path: Path) -> None:
    """The Secret's web.yml passes lunlat's own checks (certificate files aside) and its hash is
    that of the example password the scrape Secret holds."""
    docs = list(yaml.safe_load_all((KUBE / "web-config.example.yaml").read_text(encoding="utf-8")))
    web = yaml.safe_load(docs[0]["stringData"]["web.yml"])
    model = webconfig.WebConfigFile.model_validate(web)
    assert model.tls_server_config.enabled
    password = docs[1]["stringData"]["password"]
    assert bcrypt.checkpw(password.encode(), web["basic_auth_users"]["prometheus"].encode())
    endpoint = docs[2]["spec"]["endpoints"][0]
    assert (
        endpoint["scheme"] == "https"
        and endpoint["basicAuth"]["password"]["name"] == docs[1]["metadata"]["name"]
    )


@pytest.mark.parametrize(("name", "resource"), manifests(), ids=lambda v: v if isinstance(v, str) else "")
def test_manifest_is_valid_against_its_schema(name: str, resource: dict[str, Any]) -> None:
    assert problems(resource) == [], name


def test_validation_would_catch_mistakes() -> None:
    kinds = by_kind()
    daemonset = json.loads(json.dumps(kinds["DaemonSet"]))
    daemonset["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []  # misspelt field
    assert problems(daemonset)
    monitor = json.loads(json.dumps(kinds["ServiceMonitor"]))
    monitor["spec"]["endpoints"][0]["interval"] = "fifteen seconds"
    assert problems(monitor)
    monitor = json.loads(json.dumps(kinds["ServiceMonitor"]))
    monitor["spec"]["endpoints"][0]["relabeling"] = monitor["spec"]["endpoints"][0].pop("relabelings")
    assert any("relabeling" in problem for problem in problems(monitor))  # misspelt field
    rule = json.loads(json.dumps(kinds["PrometheusRule"]))
    rule["spec"]["groups"][0]["rules"][0]["expr"] = ["not", "a", "string"]
    assert problems(rule)


def test_the_prometheus_rule_is_generated_and_fresh() -> None:
    render_prometheus_rule = need("lunlat_rules.rules").render_prometheus_rule
    text = (KUBE / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert text == render_prometheus_rule(load_goals(ROOT / "alerts" / "goals.yaml")), (
        "deploy/kubernetes/prometheusrule.yaml is stale: run `bash .ci/generate`"
    )


def test_the_daemonset_is_unprivileged_and_reads_the_node_read_only() -> None:
    kinds = by_kind()
    pod = kinds["DaemonSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
    security = container["securityContext"]
    assert security == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert all(mount["readOnly"] for mount in container["volumeMounts"])
    host_paths = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host_paths == {"/proc", "/sys", "/dev"}
    assert "--path.procfs=/host/proc" in container["args"] and "--path.sysfs=/host/sys" in container["args"]
    secret = next(v["secret"] for v in pod["volumes"] if "secret" in v)
    assert secret["optional"] is True and secret["secretName"] == by_kind_secret()["metadata"]["name"]


def by_kind_secret() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((KUBE / "secret.example.yaml").read_text(encoding="utf-8"))
    return found


def test_the_service_monitor_scrapes_the_service_as_job_lunlat_named_by_node() -> None:
    kinds = by_kind()
    service, monitor = kinds["Service"], kinds["ServiceMonitor"]
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert labels[monitor["spec"]["jobLabel"]] == "lunlat"  # the rules' selector: job="lunlat"
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance"} in endpoint[
        "relabelings"
    ]
    config = yaml.safe_load(kinds["ConfigMap"]["data"]["lunlat.yaml"])
    assert config == {"diskstats": {}}
