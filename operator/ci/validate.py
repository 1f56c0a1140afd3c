"""Checks run by operator/ci.sh (see that script for the inputs).

1. The Helm chart is linted (strict) and rendered by Helm v4's engine (helm-python-sdk)
   under several value sets; values are checked against values.schema.json.
2. Every rendered object, every object in manifests/ and every object the operator's
   builders produce (`rmq-operator render`) is validated against the Kubernetes OpenAPI
   schemas (kubernetes-validate, strict: unknown fields are errors).
3. Custom resources (examples, chart example) are validated against the generated CRD
   schemas, with unknown fields rejected like the API server's pruning would drop them.
4. The CRD upgrade hook (crds.upgradeHook) is a pre-install/pre-upgrade Job with its own
   hook ServiceAccount and RBAC limited to the chart's CRDs; manifests/install.yaml
   leaves hooks out (applying it upgrades the CRDs itself).
5. Policy: every pod template meets the "restricted" Pod Security Standard; RBAC has no
   wildcards, Secrets only `create` (the generated HA secret; never get/list/watch, so
   the operator cannot read any Secret), no pods/exec; broker/nameserver pods do not
   mount a service-account token.
"""

import argparse
import copy
import glob
import json
import os
import sys

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml

KUBE_VERSION = "1.34.0"
CR_GROUP = "rmq-rs.dev/"
# Kinds outside the Kubernetes schemas that are expected in the output.
THIRD_PARTY = {"monitoring.coreos.com/v1"}

failures = []
# metadata.name of every CRD in --crds.
CRD_NAMES = []


def fail(where, message):
    failures.append(f"{where}: {message}")


def docs_of(text, where):
    out = []
    for doc in yaml.safe_load_all(text):
        if doc is None:
            continue
        if not isinstance(doc, dict) or "kind" not in doc:
            fail(where, f"not a Kubernetes object: {str(doc)[:80]}")
            continue
        out.append(doc)
    return out


def load_crd_schemas(path):
    schemas = {}
    with open(path) as f:
        for crd in docs_of(f.read(), path):
            CRD_NAMES.append(crd["metadata"]["name"])
            validate_k8s(crd, path)
            group = crd["spec"]["group"]
            kind = crd["spec"]["names"]["kind"]
            for v in crd["spec"]["versions"]:
                schema = strict_schema(v["schema"]["openAPIV3Schema"])
                schemas[(f"{group}/{v['name']}", kind)] = schema
    return schemas


def strict_schema(schema):
    """A CRD schema as plain JSON Schema, closing objects that list their properties."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if not isinstance(node, dict):
            return
        if node.get("nullable"):
            t = node.get("type")
            if isinstance(t, str):
                node["type"] = [t, "null"]
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        if node.get("x-kubernetes-int-or-string"):
            node.pop("type", None)
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        for key in ("properties", "patternProperties"):
            for child in node.get(key, {}).values():
                walk(child)
        for key in ("items", "additionalProperties", "not"):
            walk(node.get(key))
        for key in ("allOf", "anyOf", "oneOf"):
            for child in node.get(key, []):
                walk(child)

    walk(schema)
    # metadata is validated by the API server, not by the CRD schema.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    schema["properties"].setdefault("apiVersion", {"type": "string"})
    schema["properties"].setdefault("kind", {"type": "string"})
    return schema


def validate_k8s(obj, where):
    name = f"{where} {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    try:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        fail(name, f"invalid against Kubernetes {KUBE_VERSION}: {path}: {e.message}")
    except kubernetes_validate.SchemaNotFoundError:
        if obj.get("apiVersion") not in THIRD_PARTY:
            fail(name, f"no Kubernetes schema for {obj.get('apiVersion')} {obj.get('kind')}")


def validate_object(obj, where, crd_schemas):
    name = f"{where} {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    api_version = obj.get("apiVersion", "")
    if api_version.startswith(CR_GROUP):
        schema = crd_schemas.get((api_version, obj.get("kind")))
        if schema is None:
            fail(name, "no CRD schema for this kind")
            return
        for err in jsonschema.Draft202012Validator(schema).iter_errors(obj):
            path = ".".join(str(p) for p in err.path)
            fail(name, f"invalid against its CRD: {path}: {err.message}")
        return
    validate_k8s(obj, where)
    check_policy(obj, name)


def pod_spec_of(obj):
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return (spec.get("template") or {}).get("spec")
    return None


def check_policy(obj, name):
    pod = pod_spec_of(obj)
    if pod is not None:
        check_restricted(pod, name)
        component = (obj.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/component")
        if component in ("broker", "nameserver") and pod.get("automountServiceAccountToken") is not False:
            fail(name, "broker/nameserver pods must set automountServiceAccountToken: false")
    if obj.get("kind") in ("Role", "ClusterRole"):
        check_rbac(obj, name)


def check_restricted(pod, name):
    """The "restricted" Pod Security Standard (v1.34)."""
    psc = pod.get("securityContext") or {}
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(f):
            fail(name, f"{f} is forbidden")
    for v in pod.get("volumes") or []:
        allowed = {"name", "configMap", "emptyDir", "persistentVolumeClaim", "projected",
                   "secret", "downwardAPI", "csi", "ephemeral"}
        extra = set(v) - allowed
        if extra:
            fail(name, f"volume {v.get('name')} uses forbidden type {sorted(extra)}")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    for c in containers:
        cname = f"{name} container {c.get('name')}"
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            fail(cname, "privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(cname, "allowPrivilegeEscalation must be false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            fail(cname, "capabilities must drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            fail(cname, f"capabilities.add {caps.get('add')} not allowed")
        non_root = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        if non_root is not True:
            fail(cname, "runAsNonRoot must be true")
        uid = sc.get("runAsUser", psc.get("runAsUser"))
        if uid == 0:
            fail(cname, "runAsUser must not be 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            fail(cname, "seccompProfile must be RuntimeDefault or Localhost")
        if sc.get("readOnlyRootFilesystem") is not True:
            fail(cname, "readOnlyRootFilesystem must be true (project rule)")
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                fail(cname, "hostPort is forbidden")


def check_rbac(obj, name):
    cluster_wide = obj["kind"] == "ClusterRole"
    for rule in obj.get("rules") or []:
        for field in ("apiGroups", "resources", "verbs"):
            if "*" in (rule.get(field) or []):
                fail(name, f"wildcard in {field}: {rule}")
        resources = rule.get("resources") or []
        if "secrets" in resources:
            verbs = set(rule.get("verbs") or [])
            # create: the generated HA secret; get: adminCredentials, read by name. Never
            # list/watch (every Secret's value) nor change or delete one.
            if resources != ["secrets"] or not verbs <= {"create", "get"}:
                fail(name, f"Secrets may only be created or read by name: {rule}")
        if "pods/exec" in resources or "pods/attach" in resources:
            fail(name, "pods/exec and pods/attach are forbidden")
        if cluster_wide and "secrets" in resources and {"list", "watch"} & set(rule.get("verbs") or []):
            fail(name, "cluster-wide list/watch of secrets")


RUNBOOKS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "runbooks")


def check_monitoring(obj, where):
    """Every alert links an existing runbook page; the dashboard is valid JSON."""
    if obj.get("kind") == "PrometheusRule":
        for group in obj["spec"]["groups"]:
            for rule in group["rules"]:
                url = (rule.get("annotations") or {}).get("runbook_url", "")
                page = url.rsplit("/", 1)[-1]
                if not page.endswith(".md") or not os.path.isfile(os.path.join(RUNBOOKS, page)):
                    fail(where, f"alert {rule.get('alert')}: runbook_url {url!r} names no page in docs/runbooks")
                if not rule.get("expr", "").strip():
                    fail(where, f"alert {rule.get('alert')}: empty expr")
    if obj.get("kind") == "ConfigMap":
        for key, value in (obj.get("data") or {}).items():
            if key.endswith(".json"):
                try:
                    dash = json.loads(value)
                except json.JSONDecodeError as e:
                    fail(where, f"{key} is not JSON: {e}")
                    continue
                if not dash.get("panels"):
                    fail(where, f"{key} has no panels")


def check_monitoring_labels(objs, where):
    """The `release: kps` extra labels reach the chart's ServiceMonitor and PrometheusRule
    and, as --monitoring-label, the operator (for the objects it creates)."""
    for kind in ("ServiceMonitor", "PrometheusRule"):
        found = [o for o in objs if o["kind"] == kind]
        if not found or any((o["metadata"].get("labels") or {}).get("release") != "kps" for o in found):
            fail(where, f"{kind} lacks the extra label release=kps")
    args = [a for o in objs if o["kind"] == "Deployment"
            for c in o["spec"]["template"]["spec"]["containers"] for a in c.get("args", [])]
    if "--monitoring-label=release=kps" not in args:
        fail(where, f"the operator is not given --monitoring-label=release=kps: {args}")
    alerts = {r.get("alert") for o in objs if o["kind"] == "PrometheusRule"
              for g in o["spec"]["groups"] for r in g["rules"]}
    for wanted in ("RocketMQOperatorDown", "RocketMQOperatorNoLeader"):
        if wanted not in alerts:
            fail(where, f"{wanted} is not rendered although the operator is scraped")


HOOK = "helm.sh/hook"


def is_hook(obj):
    return HOOK in ((obj.get("metadata") or {}).get("annotations") or {})


def check_crd_hook(objs, where, crd_names, enabled):
    """The CRD upgrade hook (crds.upgradeHook): a pre-install/pre-upgrade Job running
    `rmq-operator crd apply`, whose ServiceAccount and RBAC are hooks too (at pre-install
    nothing else of the release exists yet), allowed get/patch on exactly the chart's CRDs
    and create, nothing else."""
    hooks = [o for o in objs if is_hook(o)]
    if not enabled:
        if hooks:
            fail(where, f"crds.upgradeHook=false still renders hooks: {[o['kind'] for o in hooks]}")
        return
    by_kind = {o["kind"]: o for o in hooks}
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"):
        obj = by_kind.get(kind)
        if obj is None:
            fail(where, f"CRD upgrade hook: no {kind} hook")
            continue
        ann = obj["metadata"]["annotations"]
        if set(ann[HOOK].split(",")) != {"pre-install", "pre-upgrade"}:
            fail(where, f"{kind} hook runs on {ann[HOOK]!r}, not pre-install,pre-upgrade")
        policy = set(ann.get("helm.sh/hook-delete-policy", "").split(","))
        if policy != {"before-hook-creation", "hook-succeeded"}:
            fail(where, f"{kind} hook delete policy {policy}")
    job, role = by_kind.get("Job"), by_kind.get("ClusterRole")
    if job is not None:
        weight = lambda o: int(o["metadata"]["annotations"].get("helm.sh/hook-weight", "0"))
        if any(weight(o) >= weight(job) for o in hooks if o is not job):
            fail(where, "the hook's ServiceAccount and RBAC must come before its Job (hook-weight)")
        pod = job["spec"]["template"]["spec"]
        args = pod["containers"][0].get("args", [])
        if args[:2] != ["crd", "apply"]:
            fail(where, f"the hook Job runs {args}, not `crd apply`")
        if pod.get("serviceAccountName") != (by_kind.get("ServiceAccount") or {}).get("metadata", {}).get("name"):
            fail(where, "the hook Job does not run as the hook's ServiceAccount")
    if role is not None:
        for rule in role.get("rules") or []:
            if rule.get("apiGroups") != ["apiextensions.k8s.io"] or rule.get("resources") != ["customresourcedefinitions"]:
                fail(where, f"hook ClusterRole grants more than customresourcedefinitions: {rule}")
            verbs = set(rule.get("verbs") or [])
            names = rule.get("resourceNames")
            if verbs - {"get", "patch", "create"}:
                fail(where, f"hook ClusterRole verbs beyond get/create/patch: {rule}")
            if verbs & {"get", "patch"} and sorted(names or []) != sorted(crd_names):
                fail(where, f"hook get/patch must be limited to the chart's CRDs {crd_names}: {rule}")


def check_chart(chart_dir, crd_schemas, value_sets, crd_names):
    report = helm.lint(chart_dir, strict=True, kube_version=f"v{KUBE_VERSION}")
    for m in report.get("messages", []):
        if m.get("severity", 0) >= 2:
            fail(f"helm lint {m.get('path')}", m.get("error"))
    for e in report.get("errors", []):
        fail("helm lint", e)
    chart = helm.Chart.load(chart_dir)
    for name, values in value_sets.items():
        try:
            chart.validate_schema(values)
            rendered = chart.render(values, name="rmq", namespace="rmq-system", is_install=True)
        except helm.HelmError as e:
            fail(f"chart values {name}", str(e))
            continue
        kinds = set()
        objs = []
        for path, text in sorted(rendered.items()):
            if not path.endswith((".yaml", ".yml")):
                continue
            for obj in docs_of(text, path):
                kinds.add(obj["kind"])
                objs.append(obj)
                validate_object(obj, f"chart[{name}] {path}", crd_schemas)
                check_monitoring(obj, f"chart[{name}] {path}")
        if name == "monitoring-labelled":
            check_monitoring_labels(objs, f"chart[{name}]")
        hook_enabled = (values.get("crds") or {}).get("upgradeHook", True)
        check_crd_hook(objs, f"chart[{name}]", crd_names, hook_enabled)
        for required in ("Deployment", "ServiceAccount", "Service"):
            if required not in kinds:
                fail(f"chart[{name}]", f"renders no {required}")
    # An invalid value set must be refused by values.schema.json.
    try:
        chart.validate_schema({"replicaCount": 0})
        fail("values.schema.json", "accepted replicaCount: 0")
    except helm.HelmError:
        pass


def notes_of(rendered):
    return next((text for path, text in rendered.items() if path.endswith("NOTES.txt")), "")


def check_notes(chart_dir):
    """NOTES.txt must say what the docs say about CRD upgrades: with the hook (the
    default) nothing is applied by hand; without it, the chart README's command."""
    chart = helm.Chart.load(chart_dir)
    with open(os.path.join(chart_dir, "README.md")) as f:
        readme = f.read()
    for hook in (True, False):
        values = {"crds": {"upgradeHook": hook}}
        for upgrade in (False, True):
            where = f"NOTES.txt (upgradeHook={hook}, {'upgrade' if upgrade else 'install'})"
            try:
                notes = notes_of(chart.render(values, name="rmq", namespace="rmq-system",
                                              is_install=not upgrade, is_upgrade=upgrade))
            except helm.HelmError as e:
                fail(where, str(e))
                continue
            if not notes:
                fail(where, "renders no NOTES.txt")
                continue
            if "Helm does not upgrade CRDs" in notes and hook:
                fail(where, "tells the user to apply CRDs by hand although the hook upgrades them")
            if "docs/kubernetes-quickstart.md" not in notes:
                fail(where, "does not point to docs/kubernetes-quickstart.md")
            commands = [l.strip() for l in notes.splitlines() if l.strip().startswith("kubectl apply")]
            crd_commands = [c for c in commands if "crds" in c]
            if hook and upgrade and "pre-upgrade hook" not in notes:
                fail(where, "does not say the hook upgraded the CRDs")
            if hook and crd_commands:
                fail(where, f"shows a CRD command although the hook applies them: {crd_commands}")
            if not hook and not crd_commands:
                fail(where, "does not say how to apply the CRDs without the hook")
            for c in crd_commands:
                if c not in readme:
                    fail(where, f"CRD command not the chart README's: {c}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chart", required=True)
    ap.add_argument("--crds", required=True)
    ap.add_argument("--manifests", required=True)
    ap.add_argument("--rendered", nargs="*", default=[])
    ap.add_argument("--install-out", help="write the plain install manifest here")
    args = ap.parse_args()

    crd_schemas = load_crd_schemas(args.crds)
    value_sets = {
        "defaults": {},
        "namespaced-ha": {"replicaCount": 2, "watchNamespace": "team-a",
                          "metrics": {"serviceMonitor": {"enabled": True}}},
        "example": {"example": {"enabled": True}},
        "no-crd-hook": {"crds": {"upgradeHook": False}},
        "monitoring": {"monitoring": {"prometheusRule": {"enabled": True},
                                      "grafanaDashboard": {"enabled": True}}},
        # The operator's own alerts (down, no leader) need its ServiceMonitor; extra labels
        # for a kube-prometheus-stack selector on every monitoring object.
        "monitoring-labelled": {
            "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kps"}}},
            "monitoring": {"prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
                           "objectLabels": {"release": "kps"}},
        },
    }
    check_chart(args.chart, crd_schemas, value_sets, CRD_NAMES)
    check_notes(args.chart)

    if args.install_out:
        chart = helm.Chart.load(args.chart)
        rendered = chart.render({}, name="rmq-operator", namespace="rmq-system", is_install=True)
        with open(args.crds) as f:
            parts = [f.read().rstrip("\n") + "\n"]
        for path in sorted(rendered):
            text = rendered[path].strip()
            if not path.endswith((".yaml", ".yml")) or not text:
                continue
            # Hooks are Helm's; a plain `kubectl apply --server-side` of this file
            # upgrades the CRDs above by itself.
            docs = docs_of(text, path)
            if docs and all(is_hook(d) for d in docs):
                continue
            if any(is_hook(d) for d in docs):
                fail(path, "mixes hooks and plain objects; keep hooks in their own template")
            parts.append(text + "\n")
        header = ("# Plain install of rmq-operator into namespace rmq-system (CRDs, RBAC, Deployment).\n"
                  "# Generated by operator/ci.sh from charts/rmq-operator with default values.\n"
                  "# kubectl create namespace rmq-system && kubectl apply --server-side -f install.yaml\n")
        body = "".join(p if p.startswith("---") else "---\n" + p for p in parts)
        with open(args.install_out, "w") as f:
            f.write(header + body)

    for path in sorted(glob.glob(os.path.join(args.manifests, "**", "*.yaml"), recursive=True)):
        with open(path) as f:
            for obj in docs_of(f.read(), path):
                validate_object(obj, path, crd_schemas)
    for path in args.rendered:
        with open(path) as f:
            objs = docs_of(f.read(), path)
        if not objs:
            fail(path, "builders rendered nothing")
        for obj in objs:
            validate_object(obj, f"builders {os.path.basename(path)}", crd_schemas)

    if failures:
        for f in failures:
            print("FAIL", f)
        print(f"{len(failures)} problem(s)")
        return 1
    print("chart, manifests and builder output valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
