#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Rebuilds the page podprof embeds (web/dist, committed) from web/src and
# the packages pinned by web/package-lock.json.
#
#   web/refresh.sh            npm ci + build: same lockfile, same bytes
#   web/refresh.sh --update   also moves every dependency to the newest
#                             version npm allows (edit package.json for a new
#                             major), rewriting package-lock.json
#
# Then: ninja -C build (lib/http embeds web/dist), meson test -C build
# browser-ui, and commit web/package*.json and web/dist together.
set -euo pipefail
cd "$(dirname "$0")"
if [[ "${1:-}" == "--update" ]]; then
	npm update --ignore-scripts --no-audit --no-fund --loglevel=error
	npm outdated || true
fi
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
node build.mjs
for f in dist/*; do
	printf '%-20s %8d bytes, %7d gzipped\n' "$f" "$(wc -c <"$f")" "$(gzip -9c "$f" | wc -c)"
done
