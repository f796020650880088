#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check podprof's Kubernetes rules that no schema knows (docs K8S.md).

usage: policy.py FILE|- ...

Every YAML document is checked. A pod spec (Pod, Deployment, StatefulSet,
DaemonSet, ReplicaSet, Job, CronJob) that contains a container named
"podprof", and a file holding a `kubectl debug --custom` profile (first line
"# validate-as: v1/EphemeralContainer"), must follow the sidecar rules; every
pod spec must follow the pod-wide ones. Prints one line per violation and
exits 1 if there is any, 0 otherwise, 2 on usage errors.
"""
import sys

import yaml

SIDECAR = "podprof"
REQUIRED_CAPS = {"BPF", "PERFMON", "SYS_PTRACE", "SETUID", "SETGID"}
OPTIONAL_CAPS = {"CHECKPOINT_RESTORE", "SYS_RESOURCE", "SYS_ADMIN", "DAC_READ_SEARCH"}
AGENT_VOLUME = "podprof-agent"
AGENT_SO = "libpodprof-agent.so"
HEALTHCHECK = ["/usr/local/bin/podprof", "healthcheck"]
POD_KINDS = {"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def pod_spec(obj):
    """The pod spec of a workload object, or None."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
    if kind in POD_KINDS:
        return (spec.get("template") or {}).get("spec")
    return None


def check_sidecar(c, where, native_ok=True):
    """Rules for the podprof container itself."""
    errs = []
    if "readinessProbe" in c:
        errs.append(f"{where}: readinessProbe on the sidecar (its readiness would decide the pod's)")
    # The only startup probe: podprof's own healthcheck, which holds back the
    # app containers until the preloaded heap agent is written (check_pod).
    sp = c.get("startupProbe")
    if sp is not None and ((sp.get("exec") or {}).get("command") or [])[:2] != HEALTHCHECK:
        errs.append(f"{where}: startupProbe on the sidecar must be exec {HEALTHCHECK}")
    sc = c.get("securityContext")
    if not isinstance(sc, dict):
        return errs + [f"{where}: no securityContext"]
    if sc.get("privileged") is not False:
        errs.append(f"{where}: privileged must be false")
    if sc.get("runAsUser") != 0:
        errs.append(f"{where}: runAsUser must be 0 (added capabilities are lost by non-root users at exec)")
    if sc.get("runAsNonRoot") is True:
        errs.append(f"{where}: runAsNonRoot true contradicts runAsUser 0")
    if sc.get("readOnlyRootFilesystem") is not True:
        errs.append(f"{where}: readOnlyRootFilesystem must be true")
    sp = sc.get("seccompProfile") or {}
    if sp.get("type") == "Localhost":
        # deploy/seccomp/podprof.json installed on the node (CRI-O, OpenShift, podman)
        if not sp.get("localhostProfile"):
            errs.append(f"{where}: seccompProfile Localhost needs localhostProfile")
    elif sp.get("type") != "RuntimeDefault":
        errs.append(f"{where}: seccompProfile.type must be RuntimeDefault or Localhost")
    caps = sc.get("capabilities") or {}
    drop = caps.get("drop") or []
    add = caps.get("add") or []
    if drop != ["ALL"]:
        errs.append(f"{where}: capabilities.drop must be [ALL], got {drop}")
    for cap in add:
        if not isinstance(cap, str):
            errs.append(f"{where}: capability {cap!r} is not a string")
            continue
        if cap.upper().startswith("CAP_"):
            errs.append(f"{where}: capability {cap} must be written without the CAP_ prefix")
        elif cap != cap.upper():
            errs.append(f"{where}: capability {cap} must be upper case")
        elif cap not in REQUIRED_CAPS | OPTIONAL_CAPS:
            errs.append(f"{where}: capability {cap} is neither required nor a documented optional one")
    names = {str(a).upper().removeprefix("CAP_") for a in add}
    missing = REQUIRED_CAPS - names
    if missing:
        errs.append(f"{where}: capabilities.add lacks {sorted(missing)}")
    if len(names) != len(add):
        errs.append(f"{where}: duplicate capabilities in {add}")
    ape = sc.get("allowPrivilegeEscalation")
    if "SYS_ADMIN" in names:
        if ape is False:
            errs.append(f"{where}: allowPrivilegeEscalation false with SYS_ADMIN is rejected by the API server")
    elif ape is not False:
        errs.append(f"{where}: allowPrivilegeEscalation must be false")
    for m in c.get("volumeMounts") or []:
        if m.get("subPath") or m.get("subPathExpr"):
            errs.append(f"{where}: volumeMount {m.get('name')} uses subPath (never sees ConfigMap updates)")
    return errs


def check_agent(spec, sidecar, list_name, cw, where):
    """The preloaded heap agent: an emptyDir the native sidecar writes (with a
    startup probe that holds back the app) and the app reads, LD_PRELOAD on a
    read-only mount of it; and no startup probe without it."""
    errs = []
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    users = []
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if c.get("name") == SIDECAR:
            continue
        pre = [e for e in c.get("env") or [] if e.get("name") == "LD_PRELOAD"]
        if len(pre) > 1:
            errs.append(f"{where}: container {c.get('name')}: LD_PRELOAD set twice (the last wins)")
        paths = [p for e in pre for p in str(e.get("value", "")).replace(" ", ":").split(":")
                 if p.endswith("/" + AGENT_SO)]
        if paths:
            users.append((c, paths[0]))
    vol = volumes.get(AGENT_VOLUME)
    smounts = {m.get("name"): m for m in sidecar.get("volumeMounts") or []}
    if not users and not vol:
        if "startupProbe" in sidecar:
            errs.append(f"{cw}: startupProbe on the sidecar without the preloaded heap agent")
        return errs
    if not vol or "emptyDir" not in vol:
        errs.append(f"{where}: volume {AGENT_VOLUME} must be an emptyDir (the preloaded heap agent)")
    if list_name != "initContainers":
        errs.append(f"{cw}: the preloaded heap agent needs a native sidecar (an ordinary container starts with the app)")
    sm = smounts.get(AGENT_VOLUME)
    if not sm or sm.get("readOnly"):
        errs.append(f"{cw}: the sidecar must mount {AGENT_VOLUME} read-write (podprof writes the agent there)")
    if "startupProbe" not in sidecar:
        errs.append(f"{cw}: no startupProbe: the app could start before the agent is written")
    for c, path in users:
        m = {x.get("name"): x for x in c.get("volumeMounts") or []}.get(AGENT_VOLUME)
        cname = c.get("name")
        if not m or m.get("readOnly") is not True:
            errs.append(f"{where}: container {cname} must mount {AGENT_VOLUME} read-only")
        elif path != m.get("mountPath", "").rstrip("/") + "/" + AGENT_SO:
            errs.append(f"{where}: container {cname}: LD_PRELOAD {path} is not on its {AGENT_VOLUME} mount")
        if sm and m and sm.get("mountPath") != m.get("mountPath"):
            errs.append(f"{where}: container {cname} mounts {AGENT_VOLUME} elsewhere than the sidecar")
    return errs


def check_pod(spec, where, annotations):
    errs = []
    inits = spec.get("initContainers") or []
    mains = spec.get("containers") or []
    if spec.get("hostPID"):
        errs.append(f"{where}: hostPID (use shareProcessNamespace)")
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            errs.append(f"{where}: hostPath volume {v.get('name')}")
    sidecars = [(c, "initContainers") for c in inits if c.get("name") == SIDECAR]
    sidecars += [(c, "containers") for c in mains if c.get("name") == SIDECAR]
    if not sidecars:
        return errs
    if len(sidecars) > 1:
        errs.append(f"{where}: more than one {SIDECAR} container")
    if spec.get("shareProcessNamespace") is not True:
        errs.append(f"{where}: shareProcessNamespace must be true")
    for c, list_name in sidecars:
        cw = f"{where}: {list_name}[{SIDECAR}]"
        errs += check_sidecar(c, cw)
        if list_name == "initContainers" and c.get("restartPolicy") != "Always":
            errs.append(f"{cw}: an init container sidecar needs restartPolicy: Always")
        if list_name == "containers" and "restartPolicy" in c:
            errs.append(f"{cw}: restartPolicy is only valid on init containers")
        ports = [p for p in c.get("ports") or [] if p.get("name") == "pprof"]
        if not ports:
            errs.append(f"{cw}: no containerPort named pprof (Alloy finds only declared ports)")
        mounts = {m.get("name"): m for m in c.get("volumeMounts") or []}
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        for name in mounts:
            if name not in volumes:
                errs.append(f"{cw}: volumeMount {name} has no volume")
        cfg = [v for v in volumes.values() if "configMap" in v and v.get("name") in mounts]
        errs += check_agent(spec, c, list_name, cw, where)
        if cfg and "checksum/config" not in annotations:
            # A generated ConfigMap name with a content hash does the same job.
            cm_name = cfg[0]["configMap"].get("name", "")
            if not (len(cm_name) > 11 and cm_name[-11] == "-"):
                errs.append(f"{where}: no checksum/config pod annotation")
    return errs


def check_file(path):
    errs = []
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    try:
        docs = [d for d in yaml.load_all(text, Loader=UniqueKeyLoader) if d is not None]
    except yaml.YAMLError as e:
        return [f"{path}: YAML: {e}"]
    if text.startswith("# validate-as: v1/EphemeralContainer"):
        for d in docs:
            errs += check_sidecar(d, f"{path}: debug profile")
        return errs
    for i, obj in enumerate(docs):
        if not isinstance(obj, dict):
            continue
        spec = pod_spec(obj)
        if spec is None:
            continue
        meta = obj.get("metadata") or {}
        where = f"{path}: {obj.get('kind')}/{meta.get('name', '#%d' % i)}"
        tmeta = meta if obj.get("kind") == "Pod" else ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
        errs += check_pod(spec, where, tmeta.get("annotations") or {})
    return errs


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    errs = []
    for path in argv[1:]:
        errs += check_file(path)
    for e in errs:
        print(e)
    if errs:
        print(f"{len(errs)} policy violation(s)")
        return 1
    print("policy ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
