#!/usr/bin/env bash
# Deletes the kind cluster created by hack/kind-up.sh.
set -euo pipefail

CLUSTER_NAME="${CLUSTER_NAME:-tephra}"

if ! command -v kind >/dev/null 2>&1; then
  echo "error: 'kind' not found on PATH." >&2
  exit 1
fi

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
  kind delete cluster --name "$CLUSTER_NAME"
else
  echo "kind cluster '$CLUSTER_NAME' does not exist; nothing to do."
fi
