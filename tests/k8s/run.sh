#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Offline validation of deploy/ and charts/podprof (docs K8S.md).
# usage: tests/k8s/run.sh TEST    (TEST: see the case at the bottom)
#
# The tools come from tests/k8s/setup-tools.sh (run here if they are
# missing). Exit 0 pass, 1 fail, 77 skip: only when the tools cannot be
# installed on this machine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
root=$(cd "$here/../.." && pwd)
chart="$root/charts/podprof"
tools="$root/.tools"
export K8S_NODE_MODULES="$tools/k8s/node_modules"
export PATH="$tools/bin:$PATH"

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

need_tools() {
	if [[ ! -x $tools/bin/helm || ! -x $tools/bin/kubectl || ! -d $K8S_NODE_MODULES/kubernetes-models ]] ||
		! command -v yamllint >/dev/null || ! command -v node >/dev/null; then
		if ! "$here/setup-tools.sh" >&2; then
			echo "SKIP: the k8s validation tools cannot be installed here" >&2
			exit 77
		fi
	fi
	command -v python3 >/dev/null || { echo "SKIP: python3 missing" >&2; exit 77; }
	python3 -c 'import yaml' 2>/dev/null || { echo "SKIP: python3-yaml missing" >&2; exit 77; }
}

work=$(mktemp -d "${TMPDIR:-/tmp}/podprof-k8s.XXXXXX")
trap 'rm -rf "$work"' EXIT

validate() { node "$here/validate.cjs" "$work/ts" "$@"; }
policy() { python3 "$here/policy.py" "$@"; }

# helm lint --strict (applies values.schema.json) with every ci/*-values.yaml,
# and a misspelt key must be rejected by the schema.
t_helm_lint() {
	local f n=0
	for f in "$chart"/ci/*-values.yaml; do
		helm lint --strict "$chart" -f "$f" >"$work/lint.out" 2>&1 ||
			{ cat "$work/lint.out"; fail "helm lint --strict -f ${f#"$root"/}"; }
		echo "ok   helm lint --strict -f ${f#"$root"/}"
		n=$((n + 1))
	done
	((n >= 4)) || fail "expected at least 4 ci/*-values.yaml, found $n"
	local bad
	for bad in config.cpu.frequncy_hz=1 config.cpu.frequency_hz=0 extraCapabilities[0]=CAP_BPF \
		nativeSidecar=yes unknownKey=1 listen=6060 agent.preload=yes agent.dir=relative; do
		if helm lint --strict "$chart" --set "$bad" >"$work/lint.out" 2>&1; then
			fail "helm lint accepted --set $bad"
		fi
		grep -q 'schema' "$work/lint.out" || { cat "$work/lint.out"; fail "--set $bad: no schema error"; }
		echo "ok   schema rejects --set $bad"
	done
	# Loopback listen with scraping makes no sense: the chart says so.
	if helm template r "$chart" --set listen=127.0.0.1:6060 --set scrape.parca.enabled=true \
		--set demo.enabled=true >"$work/t.out" 2>&1; then
		fail "loopback listen + scraping rendered"
	fi
	grep -q 'loopback-only' "$work/t.out" || { cat "$work/t.out"; fail "no loopback message"; }
	echo "ok   loopback listen with scraping is refused"
	# goroutine stays available to Alloy users who ask for it.
	helm template r "$chart" --set demo.enabled=true --set scrape.alloy.enabled=true \
		--set 'scrape.alloy.profiles={cpu,goroutine}' >"$work/t.out" || fail "goroutine opt-in render"
	grep -q 'profiles.grafana.com/goroutine.scrape: "true"' "$work/t.out" || fail "goroutine opt-in not annotated"
	if grep -q 'profiles.grafana.com/memory.scrape' "$work/t.out"; then fail "profiles list not honoured"; fi
	echo "ok   scrape.alloy.profiles opts into goroutine"
}

# Render every ci values file for an old and a new cluster; validate, lint
# and check the native-sidecar decision.
t_helm_template() {
	local f kv base out outs
	for kv in 1.27.0 1.28.5 1.29.0 1.33.0; do
		outs=()
		for f in "$chart"/ci/*-values.yaml; do
			base=$(basename "$f" -values.yaml)
			out="$work/$base-$kv.yaml"
			helm template rel "$chart" -n shop -f "$f" --kube-version "$kv" >"$out" ||
				fail "helm template -f $base --kube-version $kv"
			python3 "$here/check_render.py" "$out" "$kv" "$f" || fail "render checks: $base $kv"
			policy "$out" >"$work/p.out" || { cat "$work/p.out"; fail "policy $base $kv"; }
			echo "ok   helm template -f ci/$base-values.yaml --kube-version $kv"
			outs+=("$out")
		done
		# One tsc run per cluster version keeps this test fast.
		validate "chart-${kv//./_}" "${outs[@]}" >"$work/v.out" || { cat "$work/v.out"; fail "validate $kv"; }
		tail -n 2 "$work/v.out"
	done
}

# A parent chart that includes podprof's named templates.
t_helm_subchart() {
	local parent="$work/parent"
	cp -r "$here/fixtures/user-chart" "$parent"
	mkdir -p "$parent/charts"
	cp -r "$chart" "$parent/charts/podprof"
	local kv out
	for kv in 1.27.0 1.33.0; do
		out="$work/parent-$kv.yaml"
		helm lint --strict "$parent" --kube-version "$kv" >"$work/lint.out" 2>&1 ||
			{ cat "$work/lint.out"; fail "helm lint parent chart $kv"; }
		helm template shop "$parent" -n shop --kube-version "$kv" >"$out" ||
			fail "helm template parent chart $kv"
		python3 "$here/check_render.py" "$out" "$kv" "$parent/values.yaml" --parent ||
			fail "render checks: parent $kv"
		validate "parent-${kv//./_}" "$out" >"$work/v.out" || { cat "$work/v.out"; fail "validate parent $kv"; }
		policy "$out" >"$work/p.out" || { cat "$work/p.out"; fail "policy parent $kv"; }
		echo "ok   parent chart including podprof templates, --kube-version $kv"
	done
}

# kubectl kustomize deploy/ and a user's app with the sidecar component.
t_kustomize() {
	kubectl kustomize "$root/deploy" >"$work/demo.yaml" || fail "kubectl kustomize deploy/"
	validate kustomize-demo "$work/demo.yaml" || fail "validate kustomize deploy/"
	policy "$work/demo.yaml" || fail "policy kustomize deploy/"
	kubectl kustomize "$here/fixtures/user-app" >"$work/user.yaml" || fail "kubectl kustomize user-app"
	validate kustomize-user "$work/user.yaml" || fail "validate kustomize user-app"
	policy "$work/user.yaml" || fail "policy kustomize user-app"
	kubectl kustomize "$here/fixtures/user-app-scrape" >"$work/user-scrape.yaml" || fail "kubectl kustomize user-app-scrape"
	validate kustomize-user-scrape "$work/user-scrape.yaml" || fail "validate kustomize user-app-scrape"
	policy "$work/user-scrape.yaml" || fail "policy kustomize user-app-scrape"
	python3 "$here/check_deploy.py" "$root/deploy" "$work/user.yaml" "$work/user-scrape.yaml" || fail "deploy consistency"
}

# The raw manifests and the kubectl debug profile as files.
t_raw() {
	local files=("$root"/deploy/{namespace,configmap,deployment,service}.yaml "$root/deploy/debug-profile.yaml"
		"$root/deploy/scrape/networkpolicy.yaml")
	validate raw "${files[@]}" || fail "validate raw manifests"
	policy "${files[@]}" || fail "policy raw manifests"
}

t_yamllint() {
	yamllint --strict -c "$here/yamllint.yaml" \
		"$root/deploy" "$chart/values.yaml" "$chart/Chart.yaml" "$chart/ci" \
		"$here/fixtures" || fail "yamllint"
	# Rendered output too (no comments/indentation rules there: helm's style).
	helm template rel "$chart" -f "$chart/ci/demo-values.yaml" --kube-version 1.33.0 >"$work/r.yaml"
	kubectl kustomize "$root/deploy" >"$work/k.yaml"
	yamllint -d '{extends: default, rules: {line-length: disable, document-start: disable, indentation: disable, comments: disable, comments-indentation: disable}}' \
		--strict "$work/r.yaml" "$work/k.yaml" || fail "yamllint rendered"
	echo "ok   yamllint"
}

t_policy_negative() {
	local bad="$here/fixtures/bad/policy-bad.yaml"
	if policy "$bad" >"$work/p.out"; then
		cat "$work/p.out"
		fail "policy accepted $bad"
	fi
	local want
	for want in 'hostPID' 'hostPath volume' 'shareProcessNamespace must be true' \
		'readinessProbe on the sidecar' 'startupProbe on the sidecar' 'privileged must be false' \
		'runAsUser must be 0' 'readOnlyRootFilesystem must be true' \
		'seccompProfile.type must be RuntimeDefault' 'capabilities.drop must be \[ALL\]' \
		'CAP_BPF must be written without the CAP_ prefix' "lacks \['SETGID', 'SETUID', 'SYS_PTRACE'\]" \
		'allowPrivilegeEscalation false with SYS_ADMIN' 'uses subPath' 'restartPolicy: Always' \
		'no containerPort named pprof' 'no checksum/config' \
		'startupProbe on the sidecar must be exec' 'podprof-agent must be an emptyDir' \
		'must mount podprof-agent read-write' 'container app must mount podprof-agent read-only'; do
		grep -q "$want" "$work/p.out" || { cat "$work/p.out"; fail "policy did not report: $want"; }
	done
	echo "ok   policy rejects every rule in fixtures/bad/policy-bad.yaml"
}

t_validate_negative() {
	if validate bad "$here/fixtures/bad/schema-bad.yaml" >"$work/v.out" 2>&1; then
		cat "$work/v.out"
		fail "validate accepted schema-bad.yaml"
	fi
	grep -q 'replicas must be integer' "$work/v.out" || { cat "$work/v.out"; fail "validate(): no type error"; }
	grep -q "restartPolicyy" "$work/v.out" || { cat "$work/v.out"; fail "tsc: no unknown-field error"; }
	echo "ok   validate rejects a wrong type (validate()) and an unknown field (tsc)"
}

t_chart_meta() {
	python3 "$here/check_chart.py" "$chart" || fail "chart checks"
}

test_name=${1:-}
case $test_name in
helm-lint) need_tools; t_helm_lint ;;
helm-template) need_tools; t_helm_template ;;
helm-subchart) need_tools; t_helm_subchart ;;
kustomize) need_tools; t_kustomize ;;
raw) need_tools; t_raw ;;
yamllint) need_tools; t_yamllint ;;
policy-negative) need_tools; t_policy_negative ;;
validate-negative) need_tools; t_validate_negative ;;
chart-meta) need_tools; t_chart_meta ;;
*)
	echo "usage: $0 helm-lint|helm-template|helm-subchart|kustomize|raw|yamllint|policy-negative|validate-negative|chart-meta" >&2
	exit 2
	;;
esac
echo "PASS: k8s $test_name"
