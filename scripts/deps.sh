#!/bin/sh
# Installs the Debian packages tdist builds against, only those missing.
# Idempotent; returns at once when everything is present.
set -e
PKGS="cmake make gcc g++ pkg-config libopenblas-dev libcmocka-dev libcjson-dev openmpi-bin libopenmpi-dev python3"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null || true
$SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
