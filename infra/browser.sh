#!/usr/bin/env bash
# Idempotent: Debian's chromium and chromium-driver for the browser tests (-m browser).
# Fast when both are on PATH; otherwise `apt-get update` then install (needs root, as on
# the project's machines and CI). Prints the chromium version either way.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  chromium --version 2>/dev/null || true
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "browser: chromium is missing and installing it needs root (apt-get)" >&2
  exit 1
fi
echo "browser: installing Debian chromium + chromium-driver (apt-get, about a minute)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
chromium --version
