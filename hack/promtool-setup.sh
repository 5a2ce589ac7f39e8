#!/usr/bin/env bash
# Installs promtool (Debian's prometheus package) on a CI machine for the alerts' unit tests in
# test/e2e/queue (TestMonitoring fails without it when CI=true, and skips, saying so, elsewhere).
# Needs root; as another user it only says what it would need.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  echo ">> promtool: $(promtool --version 2>&1 | head -1)"
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  echo ">> promtool: missing, and not root to install Debian's prometheus package" >&2
  [[ "${CI:-}" == true ]] && exit 1
  exit 0
fi
echo ">> promtool: installing Debian's prometheus package"
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus
