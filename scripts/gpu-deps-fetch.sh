#!/bin/sh
# Run HERE (the dev machine) before a device call: downloads the small Debian
# packages the GPU machine lacks (cJSON, cmocka) into .debs/ (git-ignored via
# .git/info/exclude), to be carried to the device with `carry: [".debs"]`.
set -e
cd "$(dirname "$0")/.."
grep -qx '/.debs/' .git/info/exclude 2>/dev/null || echo '/.debs/' >> .git/info/exclude
mkdir -p .debs
cd .debs
ls libcjson-dev_*.deb libcmocka-dev_*.deb >/dev/null 2>&1 || apt-get download libcjson1 libcjson-dev libcmocka0 libcmocka-dev
