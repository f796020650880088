#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks on `helm template` output that depend on the values and the
cluster version: native sidecar vs ordinary container, checksum/config,
listen address vs liveness probe, Guaranteed QoS, token mount, and the
preloaded heap agent (agent.preload on a native sidecar: the podprof-agent
emptyDir, the sidecar's read-write mount and startup probe, heap.agent_dir,
LD_PRELOAD and a read-only mount in the app container; none of them
otherwise).

usage: check_render.py RENDERED.yaml KUBE_VERSION VALUES.yaml [--parent]
(--parent: the podprof values are under the `podprof` key of VALUES.yaml).
"""
import hashlib
import sys

import yaml


def ver(s):
    return tuple(int(x) for x in s.lstrip("v").split("-")[0].split(".")[:2])


def check_agent(name, spec, c, preload, adir, want_ld, app, listen, agent):
    errs = []
    vols = {v["name"]: v for v in spec.get("volumes") or []}
    smounts = {m["name"]: m for m in c.get("volumeMounts") or []}
    apps = {x["name"]: x for x in spec.get("containers") or [] if x["name"] != "podprof"}
    env_ld = {n: [e.get("value") for e in x.get("env") or [] if e["name"] == "LD_PRELOAD"] for n, x in apps.items()}
    amounts = {n: [m for m in x.get("volumeMounts") or [] if m["name"] == "podprof-agent"] for n, x in apps.items()}
    if not preload:
        if "podprof-agent" in vols or "podprof-agent" in smounts or "startupProbe" in c:
            errs.append(f"{name}: no preloaded agent, yet the podprof-agent volume, mount or startupProbe is rendered")
        for n in apps:
            if env_ld[n] or amounts[n]:
                errs.append(f"{name}: no preloaded agent, yet container {n} has LD_PRELOAD or the agent mount")
        return errs
    if "emptyDir" not in (vols.get("podprof-agent") or {}):
        errs.append(f"{name}: no podprof-agent emptyDir volume")
    sm = smounts.get("podprof-agent")
    if not sm or sm.get("mountPath") != adir or sm.get("readOnly"):
        errs.append(f"{name}: the sidecar must mount podprof-agent read-write at {adir}, got {sm}")
    sp = c.get("startupProbe") or {}
    want_cmd = ["/usr/local/bin/podprof", "healthcheck", listen]
    probe = agent.get("startupProbe") or {}
    if (sp.get("exec") or {}).get("command") != want_cmd or sp.get("periodSeconds") != probe.get("periodSeconds", 1) \
            or sp.get("failureThreshold") != probe.get("failureThreshold", 60):
        errs.append(f"{name}: startupProbe {sp}, want exec {want_cmd} every {probe.get('periodSeconds', 1)} s")
    if app not in apps:
        errs.append(f"{name}: no container {app}")
        return errs
    if env_ld[app] != [want_ld]:
        errs.append(f"{name}: container {app}: LD_PRELOAD {env_ld[app]}, want [{want_ld}]")
    if [(m.get("mountPath"), m.get("readOnly")) for m in amounts[app]] != [(adir, True)]:
        errs.append(f"{name}: container {app}: podprof-agent must be mounted read-only at {adir}, got {amounts[app]}")
    for n in apps:
        if n != app and (env_ld[n] or amounts[n]):
            errs.append(f"{name}: container {n} got the agent without being named")
    return errs


def main(argv):
    rendered, kube, values_file = argv[1:4]
    parent = "--parent" in argv
    docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
    values = yaml.safe_load(open(values_file)) or {}
    if parent:
        values = values.get("podprof") or {}
    mode = values.get("nativeSidecar", "auto")
    native = mode == "always" or (mode == "auto" and ver(kube) >= (1, 29))
    errs = []

    cms = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    cfg_maps = [d for d in cms.values() if "podprof.yaml" in (d.get("data") or {})]
    if len(cfg_maps) != 1:
        errs.append(f"expected one podprof ConfigMap, found {len(cfg_maps)}")
        cfg_text = ""
    else:
        cfg_text = cfg_maps[0]["data"]["podprof.yaml"]
    cfg = yaml.safe_load(cfg_text) or {}
    listen = str(cfg.get("listen", ""))
    loopback = listen.startswith("127.") or listen.startswith("localhost:") or listen.startswith("[::1]:")
    checksum = hashlib.sha256(cfg_text.removesuffix("\n").encode()).hexdigest()

    agent = values.get("agent") or {}
    preload = agent.get("preload", True) and native
    adir = agent.get("dir", "/podprof-agent")
    want_ld = adir + "/libpodprof-agent.so" + (":" + agent["ldPreloadAppend"] if agent.get("ldPreloadAppend") else "")
    # The app container the agent is preloaded into: the demo's, or the
    # parent chart fixture's.
    app = "checkout" if parent else "app"
    if preload and (cfg.get("heap") or {}).get("agent_dir") != adir:
        errs.append(f"heap.agent_dir {(cfg.get('heap') or {}).get('agent_dir')!r}, want {adir} (agent.preload)")
    if not preload and "agent_dir" in (cfg.get("heap") or {}):
        errs.append("heap.agent_dir set without a preloaded agent")

    pods = 0
    for d in docs:
        if d.get("kind") != "Deployment":
            continue
        tmpl = d["spec"]["template"]
        spec = tmpl["spec"]
        name = d["metadata"]["name"]
        inits = [c for c in spec.get("initContainers") or [] if c["name"] == "podprof"]
        mains = [c for c in spec.get("containers") or [] if c["name"] == "podprof"]
        if not inits and not mains:
            continue
        pods += 1
        if native:
            if len(inits) != 1 or mains:
                errs.append(f"{name}: kube {kube}: expected the native sidecar in initContainers")
            elif inits[0].get("restartPolicy") != "Always":
                errs.append(f"{name}: native sidecar without restartPolicy: Always")
        else:
            if len(mains) != 1 or inits:
                errs.append(f"{name}: kube {kube}: expected podprof in containers (no native sidecars)")
            elif "restartPolicy" in mains[0]:
                errs.append(f"{name}: ordinary container with restartPolicy")
        c = (inits or mains)[0]
        ann = tmpl["metadata"].get("annotations") or {}
        if ann.get("checksum/config") != checksum:
            errs.append(f"{name}: checksum/config {ann.get('checksum/config')} != sha256 of the ConfigMap {checksum}")
        vols = {v["name"]: v for v in spec.get("volumes") or []}
        cm_ref = (vols.get("podprof-config") or {}).get("configMap", {}).get("name")
        if cm_ref not in cms:
            errs.append(f"{name}: volume podprof-config refers to {cm_ref}, not a rendered ConfigMap")
        if loopback and "livenessProbe" in c:
            errs.append(f"{name}: liveness probe with loopback listen {listen} (the kubelet probes the pod IP)")
        if not loopback and (values.get("livenessProbe") or {}).get("enabled", True) and "livenessProbe" not in c:
            errs.append(f"{name}: no liveness probe")
        port = int(listen.rsplit(":", 1)[1]) if ":" in listen else None
        if [p["containerPort"] for p in c.get("ports", []) if p["name"] == "pprof"] != [port]:
            errs.append(f"{name}: containerPort pprof does not match listen {listen}")
        res = c.get("resources") or {}
        if values.get("guaranteedQoS"):
            if res.get("limits") != res.get("requests"):
                errs.append(f"{name}: guaranteedQoS but limits {res.get('limits')} != requests {res.get('requests')}")
            for other in spec.get("containers"):
                r = other.get("resources") or {}
                if r.get("limits") != r.get("requests"):
                    errs.append(f"{name}: container {other['name']} breaks Guaranteed QoS")
        scrape = values.get("scrape") or {}
        if (scrape.get("parca") or {}).get("enabled"):
            if ann.get("parca.dev/scrape") != "true" or ann.get("parca.dev/port") != str(port):
                errs.append(f"{name}: scrape.parca.enabled but no parca.dev/scrape and port annotations")
            # Parca's stock chart maps it to __metrics_path__, which Parca ignores.
            if "parca.dev/path" in ann:
                errs.append(f"{name}: parca.dev/path written (a no-op in Parca's stock chart)")
        alloy = scrape.get("alloy") or {}
        if alloy.get("enabled"):
            # goroutine (a ptrace stop of every thread per scrape) only on request.
            want_p = set(alloy.get("profiles") or ["cpu", "memory", "block", "mutex"])
            got_p = {k.split("/", 1)[1].split(".")[0] for k, v in ann.items()
                     if k.startswith("profiles.grafana.com/") and k.endswith(".scrape") and v == "true"}
            if got_p != want_p:
                errs.append(f"{name}: Alloy scrapes {sorted(got_p)}, want {sorted(want_p)}")
            if ann.get("profiles.grafana.com/cpu.port_name") != "pprof":
                errs.append(f"{name}: scrape.alloy.enabled but no profiles.grafana.com port annotations")
        elif any(k.endswith(".scrape") and k.startswith("profiles.grafana.com/") for k in ann):
            errs.append(f"{name}: Alloy scrape annotations without scrape.alloy.enabled")
        svc_names = [ann.get(k) for k in ("pyroscope.io/service_name", "profiles.grafana.com/service_name",
                                           "resource.opentelemetry.io/service.name")]
        want_svc = values.get("serviceName") or None
        if len(set(svc_names)) != 1 or not svc_names[0] or \
                (svc_names[0] != want_svc if want_svc else svc_names[0].count("/") != 1):
            errs.append(f"{name}: service-name annotations {svc_names}: want the same <namespace>/<name> in all three")
        want_c = values.get("targetContainer") or ("app" if (values.get("demo") or {}).get("enabled") else "")
        if want_c and not (values.get("config") or {}).get("targets"):
            got_t = cfg.get("targets") or []
            if got_t != [{"name": want_c, "container": want_c}]:
                errs.append(f"{name}: targets {got_t}, want the container {want_c} only")
            names = [x["name"] for x in spec.get("containers") or []]
            if not parent and want_c not in names:
                errs.append(f"{name}: targetContainer {want_c} is not a container of the pod ({names})")
        errs += check_agent(name, spec, c, preload, adir, want_ld, app, listen, agent)
        token = (values.get("auth") or {}).get("existingSecret")
        if token:
            key = values["auth"].get("secretKey", "token")
            if (cfg.get("http") or {}).get("token_file") != f"/etc/podprof-token/{key}":
                errs.append(f"{name}: http.token_file not set for auth.existingSecret")
            if vols.get("podprof-token", {}).get("secret", {}).get("secretName") != token:
                errs.append(f"{name}: token Secret not mounted")

    wants_pod = (values.get("demo") or {}).get("enabled") or parent
    if wants_pod and pods == 0:
        errs.append("no Deployment with the podprof sidecar rendered")
    svc = [d for d in docs if d.get("kind") == "Service"]
    if (values.get("service") or {}).get("enabled"):
        if loopback:
            errs.append(f"service enabled with loopback listen {listen}")
        if not svc or svc[0]["spec"]["ports"][0].get("name") != "pprof":
            errs.append("service.enabled but no Service with port pprof")
        if not [d for d in docs if d.get("kind") == "Pod"]:
            errs.append("service.enabled but no helm test pod")
    for e in errs:
        print(f"{rendered}: {e}")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
