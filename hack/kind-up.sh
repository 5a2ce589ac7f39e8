#!/usr/bin/env bash
# Creates (or reuses) a kind cluster, builds Tephra's images, loads them and installs manifests/.
# Env: CLUSTER_NAME (default tephra).
set -euo pipefail

CLUSTER_NAME="${CLUSTER_NAME:-tephra}"
# The tag manifests/*/deployment.yaml name, which kind-up installs unchanged.
IMAGE_TAG=dev
SCHEDULER_IMAGE="tephra/tephra-scheduler:$IMAGE_TAG"
CONTROLLERS_IMAGE="tephra/tephra-controllers:$IMAGE_TAG"
NAMESPACE="tephra-system"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

for tool in docker kind kubectl make; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: '$tool' not found on PATH; install it and retry." >&2
    exit 1
  fi
done
if ! docker info >/dev/null 2>&1; then
  echo "error: docker is installed but the daemon is not reachable (is it running?)." >&2
  exit 1
fi

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
  echo ">> reusing kind cluster '$CLUSTER_NAME'"
else
  echo ">> creating kind cluster '$CLUSTER_NAME'"
  kind create cluster --name "$CLUSTER_NAME" --config hack/kind/kind-config.yaml --wait 120s
fi
CONTEXT="kind-$CLUSTER_NAME"
kc() { kubectl --context "$CONTEXT" "$@"; }

# FROM scratch with binaries built on this machine: no image is pulled.
echo ">> building images"
make image IMAGE_TAG="$IMAGE_TAG"

echo ">> loading images into kind"
kind load docker-image --name "$CLUSTER_NAME" "$SCHEDULER_IMAGE" "$CONTROLLERS_IMAGE"

# Server-side apply: large generated CRDs overflow client-side apply's annotation.
# CRDs first, so the scheduler's informers on Tephra types can sync when it starts.
echo ">> installing CRDs"
mapfile -t crds < <(kc apply --server-side --force-conflicts -k manifests/crds -o name)
kc wait --for=condition=Established --timeout=60s "${crds[@]}"

# The image tag does not change between runs, so restart existing pods to pick up the new image.
existing=$(kc -n "$NAMESPACE" get deployment tephra-scheduler tephra-controllers \
  -o name --ignore-not-found 2>/dev/null || true)

echo ">> installing Tephra"
kc apply --server-side --force-conflicts -k manifests/
if [[ -n "$existing" ]]; then
  # shellcheck disable=SC2086
  kc -n "$NAMESPACE" rollout restart $existing
fi

echo ">> waiting for deployments"
for d in tephra-scheduler tephra-controllers; do
  kc -n "$NAMESPACE" rollout status "deployment/$d" --timeout=180s
  kc -n "$NAMESPACE" wait --for=condition=Available --timeout=60s "deployment/$d"
done

cat <<MSG

Tephra is running in kind cluster '$CLUSTER_NAME' (kubectl context $CONTEXT).
Pods opt in with schedulerName: tephra-scheduler, e.g.:

  kubectl --context $CONTEXT apply -f - <<'YAML'
  apiVersion: v1
  kind: Pod
  metadata:
    name: hello-tephra
  spec:
    schedulerName: tephra-scheduler
    containers:
    - name: pause
      image: registry.k8s.io/pause:3.10
  YAML
  kubectl --context $CONTEXT get pod hello-tephra -o wide

Scheduler logs: kubectl --context $CONTEXT -n $NAMESPACE logs deploy/tephra-scheduler
Tear down:      hack/kind-down.sh
MSG
