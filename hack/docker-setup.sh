#!/usr/bin/env bash
# Sets Docker up for the image e2e test (test/e2e/image) on a CI machine: installs Debian's
# docker.io when docker is missing, starts dockerd in the background when no daemon answers, and
# waits until one does. Needs root; as another user it only says what it would need.
# Env: DOCKERD_LOG (default /tmp/dockerd.log), DOCKER_WAIT_SECONDS (default 60).
set -euo pipefail

DOCKERD_LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"
DOCKER_WAIT_SECONDS="${DOCKER_WAIT_SECONDS:-60}"

if docker info >/dev/null 2>&1; then
  echo ">> docker: the daemon answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  echo ">> docker: not root, so not installing or starting Docker; the image e2e test needs a running daemon" >&2
  # In CI the image test must run (it fails without Docker there): say so here, first.
  [[ "${CI:-}" == true ]] && exit 1
  exit 0
fi

if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
  echo ">> docker: installing Debian's docker.io"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io
fi

if ! docker info >/dev/null 2>&1; then
  echo ">> docker: starting dockerd in the background (log: $DOCKERD_LOG)"
  nohup dockerd >"$DOCKERD_LOG" 2>&1 &
  for ((i = 0; i < DOCKER_WAIT_SECONDS; i++)); do
    if docker info >/dev/null 2>&1; then
      break
    fi
    sleep 1
  done
fi

if ! docker info >/dev/null 2>&1; then
  echo ">> docker: no daemon answered within ${DOCKER_WAIT_SECONDS}s; last lines of $DOCKERD_LOG:" >&2
  tail -n 30 "$DOCKERD_LOG" >&2 || true
  exit 1
fi
echo ">> docker: the daemon answers ($(docker version --format '{{.Server.Version}}'))"
