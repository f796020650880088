#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Consistency of deploy/: the ConfigMap equals sidecar/podprof.yaml, the
checksum/config annotation is its sha256, the kustomize component adds the
same sidecar container as deployment.yaml, the Service's port is "pprof".
The heap agent is preloaded (heap.agent_dir, the podprof-agent emptyDir, the
sidecar's startup probe, LD_PRELOAD on a read-only mount in the app); the
component's preload-patch.yaml names the app container APP_CONTAINER, a
documented placeholder the user replaces in a copy.

The component patches every annotated Deployment, StatefulSet and
DaemonSet; with deploy/sidecar-scrape as well, podprof listens on ":6060"
with a token and the pods carry the scrape annotations.

usage: check_deploy.py DEPLOY_DIR RENDERED_USER_APP.yaml [RENDERED_USER_APP_SCRAPE.yaml]
"""
import hashlib
import os
import re
import sys

import yaml


def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


SVC_KEYS = ("pyroscope.io/service_name", "profiles.grafana.com/service_name",
            "resource.opentelemetry.io/service.name")

# Fields of Parca's config structs (parca-dev/parca pkg/config/config.go,
# checked at commit 00bb3fbafc15): Parca decodes with KnownFields(true), so
# any other key makes it refuse the file.
PARCA_PROFILING = {"pprof_config", "path_prefix"}
PARCA_PPROF = {"enabled", "path", "delta", "keep_sample_type"}


def service_names(ann, what, errs):
    """The three service-name annotations are all present and equal."""
    got = [ann.get(k) for k in SVC_KEYS]
    if not got[0] or len(set(got)) != 1:
        errs.append(f"{what}: service-name annotations {dict(zip(SVC_KEYS, got))} are not all set alike")


def check_parca(path, errs):
    """Parca job: goroutine off, path_prefix in profiling_config, only known fields,
    no __metrics_path__ (Parca ignores it)."""
    cfg = load(path)[0]
    for job in cfg["scrape_configs"]:
        what = f"{os.path.basename(path)} job {job['job_name']}"
        pc = job.get("profiling_config")
        if not isinstance(pc, dict):
            errs.append(f"{what}: no profiling_config (Parca's defaults scrape goroutine)")
            continue
        if set(pc) - PARCA_PROFILING:
            errs.append(f"{what}: profiling_config has unknown fields {sorted(set(pc) - PARCA_PROFILING)}")
        if "path_prefix" not in pc:
            errs.append(f"{what}: profiling_config.path_prefix missing")
        for name, p in (pc.get("pprof_config") or {}).items():
            if set(p or {}) - PARCA_PPROF:
                errs.append(f"{what}: pprof_config.{name} has unknown fields {sorted(set(p) - PARCA_PPROF)}")
        g = (pc.get("pprof_config") or {}).get("goroutine") or {}
        if g.get("enabled") is not False:
            errs.append(f"{what}: goroutine not disabled")
        for r in job.get("relabel_configs") or []:
            if r.get("target_label") == "__metrics_path__":
                errs.append(f"{what}: relabels __metrics_path__, which Parca ignores")


def alloy_goroutine(text):
    """enabled values of every profile.goroutine block in an Alloy file."""
    return re.findall(r"profile\.goroutine\s*\{\s*enabled\s*=\s*(true|false)", text)


AGENT_DIR = "/podprof-agent"
AGENT_LD = AGENT_DIR + "/libpodprof-agent.so"
HEALTHCHECK = ["/usr/local/bin/podprof", "healthcheck"]


def agent_app(c, what, errs):
    """An application container with the preloaded heap agent."""
    ld = [e.get("value") for e in c.get("env") or [] if e["name"] == "LD_PRELOAD"]
    if ld != [AGENT_LD]:
        errs.append(f"{what}: container {c['name']}: LD_PRELOAD {ld}, want [{AGENT_LD}]")
    m = [(x.get("mountPath"), x.get("readOnly")) for x in c.get("volumeMounts") or [] if x["name"] == "podprof-agent"]
    if m != [(AGENT_DIR, True)]:
        errs.append(f"{what}: container {c['name']}: podprof-agent mounts {m}, want read-only at {AGENT_DIR}")


def agent_pod(spec, what, errs):
    """The pod side of the preloaded heap agent: emptyDir, read-write mount
    and startup probe on the sidecar."""
    vols = [v for v in spec.get("volumes") or [] if v["name"] == "podprof-agent"]
    if len(vols) != 1 or "emptyDir" not in vols[0]:
        errs.append(f"{what}: no podprof-agent emptyDir volume")
    pp = [c for c in spec.get("initContainers") or [] if c["name"] == "podprof"]
    if not pp:
        return
    m = [(x.get("mountPath"), bool(x.get("readOnly"))) for x in pp[0].get("volumeMounts") or []
         if x["name"] == "podprof-agent"]
    if m != [(AGENT_DIR, False)]:
        errs.append(f"{what}: sidecar mounts podprof-agent {m}, want read-write at {AGENT_DIR}")
    sp = pp[0].get("startupProbe") or {}
    if (sp.get("exec") or {}).get("command") != HEALTHCHECK or sp.get("periodSeconds") != 1 \
            or not 30 <= (sp.get("failureThreshold") or 0) <= 120:
        errs.append(f"{what}: sidecar startupProbe {sp}, want exec {HEALTHCHECK} every 1 s, ~60 tries")


def check_preload_patch(deploy, here, user, errs):
    """deploy/sidecar/preload-patch.yaml: one container named by the
    documented placeholder APP_CONTAINER, not applied by the component; the
    user-app fixture's copies differ from it only in that name; the rendered
    user app has the agent in exactly the containers the copies name."""
    path = os.path.join(deploy, "sidecar/preload-patch.yaml")
    text = open(path).read()
    patch = load(path)[0]
    cs = patch["spec"]["template"]["spec"]["containers"]
    if [c["name"] for c in cs] != ["APP_CONTAINER"]:
        errs.append(f"sidecar/preload-patch.yaml: container names {[c['name'] for c in cs]}, want the placeholder APP_CONTAINER")
    else:
        agent_app(cs[0], "sidecar/preload-patch.yaml", errs)
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    if "APP_CONTAINER" not in comments or "patches:" not in comments:
        errs.append("sidecar/preload-patch.yaml: the APP_CONTAINER placeholder is not documented")
    comp = open(os.path.join(deploy, "sidecar/kustomization.yaml")).read()
    if "preload-patch.yaml" in "\n".join(l for l in comp.splitlines() if not l.lstrip().startswith("#")):
        errs.append("sidecar/kustomization.yaml applies preload-patch.yaml (it would add an empty APP_CONTAINER)")
    if "preload-patch.yaml" not in comp:
        errs.append("sidecar/kustomization.yaml does not point the user to preload-patch.yaml")
    named = set()
    fixture = os.path.join(here, "fixtures/user-app")
    for f in sorted(os.listdir(fixture)):
        if f.startswith("preload-") and f.endswith(".yaml"):
            copy = open(os.path.join(fixture, f)).read()
            name = f[len("preload-"):-len(".yaml")]
            if copy != text.replace("APP_CONTAINER", name):
                errs.append(f"fixtures/user-app/{f} is not preload-patch.yaml with APP_CONTAINER={name}")
            named.add(name)
    if not named:
        errs.append("fixtures/user-app has no copy of preload-patch.yaml")
    for d in user:
        if d["kind"] not in ("Deployment", "StatefulSet", "DaemonSet"):
            continue
        spec = d["spec"]["template"]["spec"]
        what = f"user-app {d['kind']}/{d['metadata']['name']}"
        for c in spec.get("containers") or []:
            if c["name"] == "APP_CONTAINER":
                errs.append(f"{what}: the placeholder container APP_CONTAINER was added")
            elif c["name"] in named:
                agent_app(c, what, errs)
            elif c.get("env") or c.get("volumeMounts"):
                errs.append(f"{what}: container {c['name']} got env or mounts it was not given")
        for c in spec.get("initContainers") or []:
            if c["name"] != "podprof" and any(e["name"] == "LD_PRELOAD" for e in c.get("env") or []):
                errs.append(f"{what}: init container {c['name']} got LD_PRELOAD")
        if d["metadata"]["name"] != "untouched":
            agent_pod(spec, what, errs)


def main(argv):
    deploy, user_rendered = argv[1:3]
    scrape_rendered = argv[3] if len(argv) > 3 else None
    errs = []
    cfg_file = open(os.path.join(deploy, "sidecar/podprof.yaml")).read()
    cm = load(os.path.join(deploy, "configmap.yaml"))[0]
    if cm["data"]["podprof.yaml"] != cfg_file:
        errs.append("configmap.yaml data differs from sidecar/podprof.yaml")
    dep = load(os.path.join(deploy, "deployment.yaml"))[0]
    tmpl = dep["spec"]["template"]
    want = hashlib.sha256(cfg_file.encode()).hexdigest()
    got = tmpl["metadata"]["annotations"].get("checksum/config")
    if got != want:
        errs.append(f"deployment.yaml checksum/config {got} != sha256(sidecar/podprof.yaml) {want}")
    sidecar = [c for c in tmpl["spec"]["initContainers"] if c["name"] == "podprof"][0]
    # The heap agent, preloaded: heap.agent_dir, the emptyDir, the sidecar's
    # mount and startup probe, LD_PRELOAD and a read-only mount in the app.
    if (yaml.safe_load(cfg_file).get("heap") or {}).get("agent_dir") != AGENT_DIR:
        errs.append(f"sidecar/podprof.yaml: heap.agent_dir must be {AGENT_DIR}")
    agent_pod(tmpl["spec"], "deployment.yaml", errs)
    agent_app([c for c in tmpl["spec"]["containers"] if c["name"] == "app"][0], "deployment.yaml", errs)

    user = load(user_rendered)
    deps = {d["metadata"]["name"]: d for d in user if d["kind"] == "Deployment"}
    checkout = deps["checkout"]["spec"]["template"]
    patched = [c for c in checkout["spec"].get("initContainers", []) if c["name"] == "podprof"]
    if len(patched) != 1:
        errs.append("component did not add the podprof init container to the annotated Deployment")
    elif patched[0] != sidecar:
        errs.append("component's sidecar differs from deployment.yaml's")
    names = [c["name"] for c in checkout["spec"]["initContainers"]]
    if "migrate" not in names:
        errs.append("component dropped the user's own init container")
    if checkout["metadata"]["annotations"].get("team") != "payments":
        errs.append("component dropped the user's pod annotations")
    ann = checkout["metadata"]["annotations"]
    for k, v in tmpl["metadata"]["annotations"].items():
        # service_name is per workload: the component cannot set it
        if k not in ("checksum/config",) + SVC_KEYS and ann.get(k) != v:
            errs.append(f"component's annotation {k} differs from deployment.yaml's")
    check_preload_patch(deploy, os.path.dirname(os.path.abspath(__file__)), user, errs)
    untouched = deps["untouched"]["spec"]["template"]["spec"]
    if untouched.get("initContainers") or untouched.get("shareProcessNamespace"):
        errs.append("component patched a Deployment without podprof/inject")
    cms = [d for d in user if d["kind"] == "ConfigMap"]
    if len(cms) != 1 or cms[0]["data"]["podprof.yaml"] != cfg_file:
        errs.append("component's generated ConfigMap differs from sidecar/podprof.yaml")
    vol = [v for v in checkout["spec"]["volumes"] if v["name"] == "podprof-config"]
    if not vol or vol[0]["configMap"]["name"] != cms[0]["metadata"]["name"]:
        errs.append("component's volume does not refer to the generated (hashed) ConfigMap")

    for kind, name in (("StatefulSet", "ledger"), ("DaemonSet", "node-agent")):
        objs = [d for d in user if d["kind"] == kind and d["metadata"]["name"] == name]
        t = objs[0]["spec"]["template"] if objs else {"spec": {}}
        got = [c for c in t["spec"].get("initContainers", []) if c["name"] == "podprof"]
        if got != [sidecar] or not t["spec"].get("shareProcessNamespace"):
            errs.append(f"component did not add the sidecar to the annotated {kind}")
    ledger = [d for d in user if d["kind"] == "StatefulSet"][0]["spec"]["template"]
    if [ledger["metadata"]["annotations"].get(k) for k in SVC_KEYS] != ["shop/ledger"] * 3:
        errs.append("component changed the workload's service-name annotations")
    service_names(tmpl["metadata"]["annotations"], "deployment.yaml", errs)
    if "127.0.0.1:" not in cfg_file.split("\nlisten:")[1].split("\n")[0]:
        errs.append("sidecar/podprof.yaml: the default listen address must be loopback")

    if scrape_rendered:
        sc = load(scrape_rendered)
        cms = [d for d in sc if d["kind"] == "ConfigMap"]
        cfg = yaml.safe_load(cms[0]["data"]["podprof.yaml"]) if len(cms) == 1 else {}
        if (cfg.get("heap") or {}).get("agent_dir") != AGENT_DIR:
            errs.append(f"sidecar-scrape: heap.agent_dir must stay {AGENT_DIR}")
        if cfg.get("listen") != ":6060" or not (cfg.get("http") or {}).get("token_file"):
            errs.append("sidecar-scrape: podprof must listen on :6060 with a token file")
        for d in sc:
            if d["kind"] not in ("Deployment", "StatefulSet", "DaemonSet") or d["metadata"]["name"] == "untouched":
                continue
            t = d["spec"]["template"]
            a = t["metadata"].get("annotations") or {}
            if a.get("parca.dev/scrape") != "true" or a.get("profiles.grafana.com/cpu.port_name") != "pprof":
                errs.append(f"sidecar-scrape: {d['kind']}/{d['metadata']['name']} lacks the scrape annotations")
            alloy = {k.split("/", 1)[1].split(".")[0] for k, v in a.items()
                     if k.startswith("profiles.grafana.com/") and k.endswith(".scrape") and v == "true"}
            if alloy != {"cpu", "memory", "block", "mutex"}:
                errs.append(f"sidecar-scrape: {d['kind']}/{d['metadata']['name']}: Alloy scrapes {sorted(alloy)}"
                            " (goroutine must stay opt-in)")
            if "parca.dev/path" in a:
                errs.append(f"sidecar-scrape: {d['kind']}/{d['metadata']['name']}: parca.dev/path is a no-op in Parca's stock chart")
            pp = [c for c in t["spec"]["initContainers"] if c["name"] == "podprof"]
            mounts = {m["name"]: m["mountPath"] for m in (pp[0].get("volumeMounts") or [])} if pp else {}
            tf = (cfg.get("http") or {}).get("token_file", "")
            if "podprof-token" not in mounts or not tf.startswith(mounts.get("podprof-token", "?") + "/"):
                errs.append(f"sidecar-scrape: {d['kind']}/{d['metadata']['name']}: token Secret not mounted where token_file points")
            if "podprof-config" not in mounts:
                errs.append(f"sidecar-scrape: {d['kind']}/{d['metadata']['name']}: the config mount was lost")

    for f in ("parca.yaml", "parca-static.yaml"):
        check_parca(os.path.join(deploy, "scrape", f), errs)
    static = alloy_goroutine(open(os.path.join(deploy, "scrape/alloy-static.alloy")).read())
    if static != ["false"]:
        errs.append(f"scrape/alloy-static.alloy: profile.goroutine enabled {static}, want false")
    # alloy.alloy: one pipeline per type; only the goroutine one (kept for pods
    # that opt in with profiles.grafana.com/goroutine.scrape) enables it.
    text = open(os.path.join(deploy, "scrape/alloy.alloy")).read()
    for m in re.finditer(r'pyroscope\.scrape "podprof_(\w+)" \{(.*?)\n\}', text, re.S):
        if alloy_goroutine(m.group(2)) != ["true" if m.group(1) == "goroutine" else "false"]:
            errs.append(f"scrape/alloy.alloy: pipeline {m.group(1)} has goroutine {alloy_goroutine(m.group(2))}")

    svc = load(os.path.join(deploy, "service.yaml"))[0]
    if [p["name"] for p in svc["spec"]["ports"]] != ["pprof"]:
        errs.append("service.yaml: port must be named pprof")
    ns = load(os.path.join(deploy, "namespace.yaml"))[0]
    if ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") != "privileged":
        errs.append("namespace.yaml: Pod Security enforce must be privileged")
    for e in errs:
        print(f"FAIL {e}")
    if not errs:
        print("ok   deploy/ is consistent (ConfigMap, checksum, component, Service, Namespace)")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
