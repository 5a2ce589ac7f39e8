#!/usr/bin/env bash
# go-install-tool.sh OUT MODULE@VERSION: builds a Go tool in its own module graph and puts it at
# OUT (a versioned name under bin/), so that it is built once per version.
set -euo pipefail
out=$1 pkg=$2
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$(dirname "$out")/.install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" GOFLAGS= GOWORK=off go install "$pkg"
mv "$tmp"/* "$out"
