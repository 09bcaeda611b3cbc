"""What deploy/kubernetes/ must hold, beyond the Kubernetes schemas: read by
tests/tests/all/kubernetes.rs with the harness's virtualenv (PyYAML).

    python kubernetes_manifests.py BASE_DIR OUT_DIR [--replace FILE=PATH ...]

Reads BASE_DIR/kustomization.yaml and every resource file it lists (`--replace FILE=PATH`
reads PATH in place of the resource FILE, for the test's broken copies), checks the invariants
below, writes the ConfigMap's tenants file to OUT_DIR/<the path --config names, from the
ConfigMap's mount> so that the binary can check it, and prints one JSON object:
`resources` (the files read), `violations` (one line each; empty when all hold), `config` (the
tenants file written), `components` (where the file expects its components, under OUT_DIR:
the test puts a component there), `shutdown_grace_ms` and `termination_grace_seconds`. Exit status 2 when
a file cannot be read or parsed at all.
"""

import json
import os
import sys
import tomllib

import yaml

LABEL_KEYS = ("app.kubernetes.io/name", "app.kubernetes.io/component")


def flag(args, name):
    """The value of `--name=V` or `--name V` in args, or None."""
    for i, arg in enumerate(args):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(args):
            return args[i + 1]
    return None


UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(text):
    """A duration as the host reads one (a whole number and a unit, `30s`), in ms; or None."""
    digits = len(text) - len(text.lstrip("0123456789"))
    number, unit = text[:digits], text[digits:]
    if not number or unit not in UNITS_MS:
        return None
    return int(number) * UNITS_MS[unit]


def has_flag(args, name):
    return any(a == name or a.startswith(name + "=") for a in args)


def port_of(addr):
    return int(addr.rsplit(":", 1)[1]) if addr and ":" in addr else None


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def main():
    base, out = sys.argv[1], sys.argv[2]
    replace = {}
    rest = sys.argv[3:]
    while rest:
        if rest[0] != "--replace" or len(rest) < 2:
            sys.exit("usage: kubernetes_manifests.py BASE OUT [--replace FILE=PATH ...]")
        name, path = rest[1].split("=", 1)
        replace[name] = path
        rest = rest[2:]

    violations = []

    def check(ok, message):
        if not ok:
            violations.append(message)
        return ok

    with open(os.path.join(base, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    check(kustomization.get("kind") == "Kustomization", "kustomization.yaml is not a Kustomization")
    check("namespace" not in kustomization, "the base sets a namespace: the caller's -n should")
    files = kustomization.get("resources") or []
    check(files, "kustomization.yaml lists no resources")

    by_kind = {}
    read = []
    for name in files:
        path = replace.get(name, os.path.join(base, name))
        if not os.path.isfile(path):
            violations.append(f"resource {name} is not a file (kustomization.yaml)")
            continue
        read.append(path)
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                kind = doc.get("kind")
                meta = doc.get("metadata") or {}
                check("namespace" not in meta, f"{name}: {kind} names a namespace")
                labels = meta.get("labels") or {}
                check(
                    all(k in labels for k in LABEL_KEYS),
                    f"{name}: {kind} lacks the labels {', '.join(LABEL_KEYS)}",
                )
                by_kind.setdefault(kind, []).append(doc)

    def one(kind):
        docs = by_kind.get(kind) or []
        check(len(docs) == 1, f"{len(docs)} {kind}s, not one")
        return docs[0] if docs else {}

    account = one("ServiceAccount")
    config_map = one("ConfigMap")
    secret = one("Secret")
    deployment = one("Deployment")
    service = one("Service")
    pdb = one("PodDisruptionBudget")

    annotations = (account.get("metadata") or {}).get("annotations") or {}
    check(
        str(annotations.get("eks.amazonaws.com/role-arn", "")).startswith("arn:aws:iam::"),
        "the ServiceAccount has no eks.amazonaws.com/role-arn (IRSA) annotation",
    )
    check(
        "admin-token" in (secret.get("stringData") or {}) or "admin-token" in (secret.get("data") or {}),
        "the Secret has no admin-token key",
    )

    spec = deployment.get("spec") or {}
    check((spec.get("replicas") or 0) >= 2, f"replicas {spec.get('replicas')}: fewer than 2")
    template = spec.get("template") or {}
    pod_labels = (template.get("metadata") or {}).get("labels") or {}
    pod_annotations = (template.get("metadata") or {}).get("annotations") or {}
    match_labels = (spec.get("selector") or {}).get("matchLabels") or {}
    check(selects(match_labels, pod_labels), "the Deployment's selector does not select its pods")
    pod = template.get("spec") or {}
    pod_security = pod.get("securityContext") or {}
    check(
        pod.get("serviceAccountName") == (account.get("metadata") or {}).get("name"),
        "the pods do not run as the ServiceAccount",
    )
    check(
        ((pod_security.get("seccompProfile") or {}).get("type")) == "RuntimeDefault",
        "the pods' seccompProfile is not RuntimeDefault",
    )
    check(pod.get("topologySpreadConstraints"), "no topologySpreadConstraints")

    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    containers = pod.get("containers") or []
    check(len(containers) == 1, f"{len(containers)} containers, not one")
    for container in (pod.get("initContainers") or []) + containers:
        name = container.get("name")
        security = container.get("securityContext") or {}

        def effective(key):
            return security.get(key, pod_security.get(key))

        check(effective("runAsNonRoot") is True, f"container {name}: runAsNonRoot is not true")
        check(effective("runAsUser") not in (None, 0), f"container {name}: runAsUser is not a non-root uid")
        check(security.get("readOnlyRootFilesystem") is True, f"container {name}: readOnlyRootFilesystem is not true")
        check(security.get("allowPrivilegeEscalation") is False, f"container {name}: allowPrivilegeEscalation is not false")
        check(
            "ALL" in ((security.get("capabilities") or {}).get("drop") or []),
            f"container {name}: capabilities do not drop ALL",
        )
        resources = container.get("resources") or {}
        check(
            resources.get("requests") and resources.get("limits"),
            f"container {name}: no resource requests and limits",
        )
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(mount.get("name"))
            check(volume is not None, f"container {name}: mount of an unknown volume {mount.get('name')}")
            if volume is not None and not mount.get("readOnly"):
                check("emptyDir" in volume, f"container {name}: writable mount {mount.get('mountPath')} is not an emptyDir")

    host = containers[0] if containers else {}
    args = host.get("args") or []
    env = {e.get("name"): e.get("value") for e in host.get("env") or []}
    mounts = {m.get("mountPath"): m for m in host.get("volumeMounts") or []}
    check(args[:1] == ["run"], "the host container does not run `ruststream run`")

    def mounted_emptydir(path):
        mount = mounts.get(path)
        return bool(mount) and "emptyDir" in volumes.get(mount.get("name"), {})

    state_dir = flag(args, "--state-dir") or env.get("RUSTSTREAM_STATE_DIR")
    check(state_dir and mounted_emptydir(state_dir), f"the state directory {state_dir} is not an emptyDir mount")
    check(mounted_emptydir("/tmp"), "/tmp is not an emptyDir mount")
    cache = flag(args, "--compile-cache") or env.get("RUSTSTREAM_COMPILE_CACHE", "")
    check(
        cache.startswith("/tmp/") or (state_dir and cache.startswith(state_dir + "/")),
        f"the compile cache {cache!r} is neither under /tmp nor the state directory",
    )
    # The token, the same on every replica: the Secret's value in the environment, or a file
    # on a mount.
    token_file = flag(args, "--admin-token-file") or env.get("RUSTSTREAM_ADMIN_TOKEN_FILE")
    token_ref = (
        next((e for e in host.get("env") or [] if e.get("name") == "RUSTSTREAM_ADMIN_TOKEN"), {})
        .get("valueFrom", {})
        .get("secretKeyRef", {})
    )
    from_secret = (
        token_ref.get("name") == (secret.get("metadata") or {}).get("name")
        and token_ref.get("key") == "admin-token"
    )
    on_mount = bool(token_file) and any(token_file.startswith(p.rstrip("/") + "/") for p in mounts)
    check(
        from_secret != on_mount,
        "the admin token comes neither from the Secret's admin-token key nor from a file on a "
        f"mount, or from both (env {token_ref}, file {token_file})",
    )

    # The admin API must be reachable from the kubelet: a wildcard address, which the host
    # allows only with --allow-remote-admin and TLS.
    admin_addr = flag(args, "--admin-addr") or env.get("RUSTSTREAM_ADMIN_ADDR") or "127.0.0.1:9465"
    check(admin_addr.startswith("0.0.0.0:") or admin_addr.startswith("[::]:"), f"--admin-addr {admin_addr} is not reachable in a pod")
    check(has_flag(args, "--allow-remote-admin"), "a non-loopback --admin-addr without --allow-remote-admin")
    tls = has_flag(args, "--admin-tls-cert") and has_flag(args, "--admin-tls-key")
    check(tls, "--allow-remote-admin without --admin-tls-cert and --admin-tls-key")
    ports = {p.get("name"): p.get("containerPort") for p in host.get("ports") or []}
    check(ports.get("admin") == port_of(admin_addr), f"port `admin` is not --admin-addr's {port_of(admin_addr)}")

    for probe_name, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        probe = (host.get(probe_name) or {}).get("httpGet") or {}
        check(probe.get("path") == path, f"{probe_name} does not GET {path}")
        port = probe.get("port")
        check(
            port == port_of(admin_addr) or ports.get(port) == port_of(admin_addr),
            f"{probe_name} is not on the admin port",
        )
        check(probe.get("scheme", "HTTP") == ("HTTPS" if tls else "HTTP"), f"{probe_name}'s scheme is not the admin API's")

    grace = flag(args, "--shutdown-grace") or env.get("RUSTSTREAM_SHUTDOWN_GRACE")
    check(grace is not None, "no --shutdown-grace: give the host's grace explicitly")
    grace_ms = duration_ms(grace) if grace is not None else 15000
    check(grace_ms is not None, f"--shutdown-grace {grace} is not a duration such as 30s")
    grace_ms = grace_ms or 15000
    termination = pod.get("terminationGracePeriodSeconds", 30)
    check(
        termination > grace_ms / 1000,
        f"terminationGracePeriodSeconds {termination} is not more than --shutdown-grace {grace}",
    )

    metrics_addr = flag(args, "--metrics-addr") or env.get("RUSTSTREAM_METRICS_ADDR") or "127.0.0.1:9464"
    check(not metrics_addr.startswith("127."), f"--metrics-addr {metrics_addr} is unreachable for Prometheus")
    check(pod_annotations.get("prometheus.io/scrape") == "true", "no prometheus.io/scrape annotation")
    check(pod_annotations.get("prometheus.io/path") == "/metrics", "prometheus.io/path is not /metrics")
    check(
        pod_annotations.get("prometheus.io/port") == str(port_of(metrics_addr)),
        "prometheus.io/port is not --metrics-addr's port",
    )
    check(ports.get("metrics") == port_of(metrics_addr), "port `metrics` is not --metrics-addr's")

    pdb_spec = pdb.get("spec") or {}
    check(pdb_spec.get("maxUnavailable") == 1, "the PodDisruptionBudget's maxUnavailable is not 1")
    check(
        selects((pdb_spec.get("selector") or {}).get("matchLabels"), pod_labels),
        "the PodDisruptionBudget does not select the Deployment's pods",
    )
    service_spec = service.get("spec") or {}
    check(selects(service_spec.get("selector"), pod_labels), "the Service does not select the Deployment's pods")
    service_ports = {p.get("name"): p for p in service_spec.get("ports") or []}
    check(
        (service_ports.get("admin") or {}).get("targetPort") in ("admin", port_of(admin_addr)),
        "the Service has no `admin` port to the admin API",
    )
    admin_hosts = [a.split("=", 1)[1] for a in args if a.startswith("--admin-host=")]
    service_name = (service.get("metadata") or {}).get("name")
    check(service_name in admin_hosts, f"the Service's name {service_name} is no --admin-host")

    # The optional ServiceMonitor (a CRD: no schema to validate it against) scrapes that Service.
    monitoring = os.path.join(base, "monitoring", "kustomization.yaml")
    if os.path.isfile(monitoring):
        with open(monitoring) as f:
            for name in yaml.safe_load(f).get("resources") or []:
                with open(os.path.join(base, "monitoring", name)) as f:
                    monitor = yaml.safe_load(f)
                if monitor.get("kind") != "ServiceMonitor":
                    continue
                monitor_spec = monitor.get("spec") or {}
                check(
                    selects((monitor_spec.get("selector") or {}).get("matchLabels"), (service.get("metadata") or {}).get("labels") or {}),
                    "the ServiceMonitor does not select the Service",
                )
                for endpoint in monitor_spec.get("endpoints") or []:
                    check(endpoint.get("port") in service_ports, f"the ServiceMonitor scrapes port {endpoint.get('port')}, not the Service's")
                    check(endpoint.get("path", "/metrics") == "/metrics", "the ServiceMonitor's path is not /metrics")

    # The tenants file: where --config names it, from the ConfigMap's mount.
    config = flag(args, "--config")
    written = None
    components = []
    check(config is not None, "no --config")
    if config is not None:
        directory, key = os.path.split(config)
        mount = mounts.get(directory) or {}
        source = (volumes.get(mount.get("name")) or {}).get("configMap") or {}
        check(
            source.get("name") == (config_map.get("metadata") or {}).get("name"),
            f"--config {config} is not in the ConfigMap's mount",
        )
        text = (config_map.get("data") or {}).get(key)
        if check(text is not None, f"the ConfigMap has no {key}"):
            written = os.path.join(out, config.lstrip("/"))
            os.makedirs(os.path.dirname(written), exist_ok=True)
            with open(written, "w") as f:
                f.write(text)
            tenants = tomllib.loads(text)
            host_keys = tenants.get("host") or {}
            for key_name in ("component_bucket", "desired_table"):
                check(key_name in host_keys, f"the tenants file has no [host] {key_name}")
            check(host_keys.get("lease_store") == "dynamodb", "the tenants file's lease_store is not dynamodb")
            for tenant in tenants.get("tenants") or []:
                for component in tenant.get("components") or []:
                    components.append(os.path.normpath(os.path.join(os.path.dirname(written), component)))

    print(json.dumps({
        "resources": read,
        "violations": violations,
        "config": written,
        "components": components,
        "shutdown_grace_ms": grace_ms,
        "termination_grace_seconds": termination,
    }))


if __name__ == "__main__":
    try:
        main()
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError) as error:
        print(f"cannot read the manifests: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(2)
