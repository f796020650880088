#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Static checks of charts/podprof: apiVersion v2, draft-07 schema with
additionalProperties false on every object, values.yaml valid against the
keys the schema knows, image tag == appVersion, the named templates exist.

usage: check_chart.py CHART_DIR
"""
import json
import os
import sys

import yaml


def walk(schema, path, errs):
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "object" or "properties" in schema:
        if path == "/properties/global" or path.endswith("/selector"):
            pass  # free-form by design: Helm globals, label maps
        elif schema.get("additionalProperties") is not False:
            errs.append(f"schema {path or '/'}: additionalProperties must be false")
    for key, sub in (schema.get("properties") or {}).items():
        walk(sub, f"{path}/properties/{key}", errs)
    if isinstance(schema.get("items"), dict):
        walk(schema["items"], f"{path}/items", errs)


def covered(values, schema, path, errs):
    """Every key in values.yaml is described by the schema."""
    if not isinstance(values, dict):
        return
    props = schema.get("properties") or {}
    for k, v in values.items():
        if k not in props:
            errs.append(f"values.yaml {path}.{k}: not in the schema")
        else:
            covered(v, props[k], f"{path}.{k}", errs)


def main(argv):
    chart = argv[1]
    errs = []
    meta = yaml.safe_load(open(os.path.join(chart, "Chart.yaml")))
    if meta.get("apiVersion") != "v2":
        errs.append("Chart.yaml: apiVersion must be v2")
    schema = json.load(open(os.path.join(chart, "values.schema.json")))
    if schema.get("$schema") != "http://json-schema.org/draft-07/schema#":
        errs.append("values.schema.json: $schema must be draft-07")
    walk(schema, "", errs)
    values = yaml.safe_load(open(os.path.join(chart, "values.yaml")))
    covered(values, schema, "", errs)
    # goroutine dumps stop every thread of the app per scrape: opt-in only.
    alloy = values["scrape"]["alloy"]
    if "goroutine" in alloy["profiles"]:
        errs.append("values.yaml: scrape.alloy.profiles must not include goroutine by default")
    enum = schema["properties"]["scrape"]["properties"]["alloy"]["properties"]["profiles"]["items"]["enum"]
    if "goroutine" not in enum:
        errs.append("values.schema.json: users can no longer opt into goroutine")
    if values["image"]["tag"] != str(meta.get("appVersion")):
        errs.append(f"values.yaml image.tag {values['image']['tag']} != appVersion {meta.get('appVersion')}")
    helpers = open(os.path.join(chart, "templates/_helpers.tpl")).read()
    for name in ("podprof.sidecar", "podprof.volumes", "podprof.annotations",
                 "podprof.initContainers", "podprof.containers",
                 "podprof.appEnv", "podprof.appVolumeMounts"):
        if f'define "{name}"' not in helpers:
            errs.append(f"_helpers.tpl: no template {name}")
    notes = open(os.path.join(chart, "templates/NOTES.txt")).read()
    # The heap agent is preloaded by default and can be turned off.
    agent = values.get("agent") or {}
    if agent.get("preload") is not True or agent.get("dir") != "/podprof-agent":
        errs.append(f"values.yaml: agent.preload must default to true in /podprof-agent, got {agent}")
    if (schema["properties"]["agent"]["properties"]["preload"] or {}).get("type") != "boolean":
        errs.append("values.schema.json: agent.preload must be a boolean")
    for want in ("port-forward", "go tool pprof", "agent.preload=false"):
        if want not in notes:
            errs.append(f"NOTES.txt does not mention {want}")
    for e in errs:
        print(f"FAIL {e}")
    if not errs:
        print("ok   chart metadata, schema and helpers")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
