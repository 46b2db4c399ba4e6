#!/usr/bin/env python3
"""deploy.yaml: the Kubernetes manifests in deploy/k8s/ are valid YAML and hang
together (names, namespaces, selectors, volumes, probes). No cluster needed.
Exits 77 (skipped) when PyYAML is not installed.
Usage: check_yaml.py REPO_ROOT"""
import os
import sys

try:
    import yaml
except ImportError:
    print("skipped: PyYAML is not installed (python3-yaml)")
    sys.exit(77)

root = sys.argv[1]
k8s = os.path.join(root, "deploy", "k8s")
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


objects = {}
for name in sorted(os.listdir(k8s)):
    if not name.endswith(".yaml"):
        continue
    with open(os.path.join(k8s, name)) as f:
        try:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            errors.append(f"{name}: {e}")
            continue
    for d in docs:
        where = f"{name}: {d.get('kind')}/{d.get('metadata', {}).get('name')}"
        for key in ("apiVersion", "kind", "metadata"):
            check(key in d, f"{where}: no {key}")
        check("name" in d.get("metadata", {}), f"{where}: no metadata.name")
        if d.get("kind") != "Namespace":
            check(d["metadata"].get("namespace") == "kiln",
                  f"{where}: not in namespace kiln")
        objects[(d["kind"], d["metadata"]["name"])] = (where, d)

check(set(objects) >= {("Namespace", "kiln"), ("ConfigMap", "kilnd-config"),
                       ("DaemonSet", "kilnd"), ("Deployment", "kiln-redis"),
                       ("Service", "kiln-redis")},
      f"missing objects; found {sorted(objects)}")


def check_workload(where, obj):
    spec = obj["spec"]
    labels = spec["template"]["metadata"]["labels"]
    for k, v in spec["selector"]["matchLabels"].items():
        check(labels.get(k) == v, f"{where}: selector {k}={v} not in labels")
    pod = spec["template"]["spec"]
    volumes = {v["name"] for v in pod.get("volumes", [])}
    for c in pod.get("initContainers", []) + pod["containers"]:
        check("image" in c, f"{where}: container {c['name']} has no image")
        for m in c.get("volumeMounts", []):
            check(m["name"] in volumes,
                  f"{where}: {c['name']} mounts unknown volume {m['name']}")
    for c in pod["containers"]:
        check("requests" in c.get("resources", {}),
              f"{where}: {c['name']} has no resource requests")
        for probe in ("readinessProbe", "livenessProbe"):
            check(probe in c, f"{where}: {c['name']} has no {probe}")
    return pod


for (kind, name), (where, obj) in objects.items():
    if kind in ("DaemonSet", "Deployment"):
        pod = check_workload(where, obj)
        if kind == "DaemonSet":
            (kilnd,) = pod["containers"]
            mounts = {m["mountPath"] for m in kilnd["volumeMounts"]}
            check({"/run/kiln", "/var/cache/kiln", "/etc/kiln"} <= mounts,
                  f"{where}: kilnd lacks a mount: {sorted(mounts)}")
            check(kilnd["command"][-2:] == ["--config", "/etc/kiln/kilnd.toml"],
                  f"{where}: kilnd not started with the ConfigMap's file")
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                cmd = kilnd.get(probe, {}).get("exec", {}).get("command", [])
                check(cmd[1:] == ["status", "--address",
                                  "unix:/run/kiln/kilnd.sock"],
                      f"{where}: {probe} is not `kiln status` on the socket")
            # The metrics port: the ConfigMap's metrics-address, a named
            # container port and the scrape annotations agree.
            toml = objects.get(("ConfigMap", "kilnd-config"),
                               (None, {"data": {}}))[1]["data"].get(
                                   "kilnd.toml", "")
            addr = [line.split("=", 1)[1].strip().strip('"')
                    for line in toml.splitlines()
                    if line.startswith("metrics-address")]
            check(len(addr) == 1, f"{where}: the ConfigMap sets no "
                  "metrics-address")
            port = addr[0].rsplit(":", 1)[-1] if addr else ""
            ports = {p.get("name"): str(p.get("containerPort"))
                     for p in kilnd.get("ports", [])}
            check(ports.get("metrics") == port,
                  f"{where}: no container port 'metrics' = {port}")
            notes = obj["spec"]["template"]["metadata"].get("annotations", {})
            check(notes.get("prometheus.io/scrape") == "true" and
                  notes.get("prometheus.io/port") == port,
                  f"{where}: no Prometheus scrape annotations for {port}")
            hostpaths = {v["hostPath"]["path"] for v in pod["volumes"]
                         if "hostPath" in v}
            check(hostpaths == {"/run/kiln", "/var/cache/kiln"},
                  f"{where}: hostPaths {sorted(hostpaths)}")
    if kind == "Service":
        target = objects.get(("Deployment", name))
        check(target is not None, f"{where}: no Deployment {name}")
        if target:
            labels = target[1]["spec"]["template"]["metadata"]["labels"]
            for k, v in obj["spec"]["selector"].items():
                check(labels.get(k) == v, f"{where}: selects {k}={v}, "
                      "which the Deployment's pods do not have")
            ports = {p["name"] for c in target[1]["spec"]["template"]["spec"]
                     ["containers"] for p in c.get("ports", [])}
            for p in obj["spec"]["ports"]:
                check(p["targetPort"] in ports,
                      f"{where}: targetPort {p['targetPort']} is no named port")

for e in errors:
    print("FAIL:", e)
if errors:
    sys.exit(1)
print(f"ok: {len(objects)} objects in deploy/k8s/ are consistent")
