#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the build into a temporary prefix (not the configured one), then
# builds and runs a program using only `pkg-config tdist`: once against the
# shared library, once against the static one with --static (Libs.private).
# Usage: install_check.sh BUILD_DIR SOURCE_FILE CC
set -eu
build=$1 src=$2 cc=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdist-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_check: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
pc=$(find "$tmp/prefix" -name tdist.pc | head -n 1)
[ -n "$pc" ] || fail "no tdist.pc installed under $tmp/prefix"
export PKG_CONFIG_PATH="$(dirname "$pc")"
unset PKG_CONFIG_LIBDIR 2>/dev/null || true

# The prefix pkg-config reports is the one we installed into.
prefix=$(pkg-config --variable=prefix tdist)
[ "$(cd "$prefix" && pwd -P)" = "$(cd "$tmp/prefix" && pwd -P)" ] || fail "prefix is '$prefix', installed into '$tmp/prefix'"
libdir=$(pkg-config --variable=libdir tdist)
[ -e "$libdir/libtdist.a" ] || fail "libdir '$libdir' has no libtdist.a"
grep -q "$build" "$pc" && fail "tdist.pc names the build folder: $(cat "$pc")"

# Shared.
$cc -o "$tmp/hello_shared" "$src" $(pkg-config --cflags --libs tdist) || fail "shared build failed"
LD_LIBRARY_PATH="$libdir" "$tmp/hello_shared" | grep -q "pc_hello ok" || fail "shared program failed"

# Static: libtdist.a plus everything Libs.private and Requires.private name.
static_libs=$(pkg-config --static --libs tdist | sed 's/-ltdist\b/-l:libtdist.a/')
$cc -o "$tmp/hello_static" "$src" $(pkg-config --cflags tdist) $static_libs || fail "static build failed (flags: $static_libs)"
if command -v ldd >/dev/null && ldd "$tmp/hello_static" | grep -q libtdist; then
  fail "the static program loads libtdist.so"
fi
"$tmp/hello_static" | grep -q "pc_hello ok" || fail "static program failed"

# Static again with a program that calls the operators: in a CUDA build that
# pulls in nvcc-compiled objects, which need the C++ runtime (Libs.private).
ops_src=$(dirname "$src")/../../examples/tp_mlp_ops.c
if [ -f "$ops_src" ]; then
  $cc -o "$tmp/ops_static" "$ops_src" $(pkg-config --cflags tdist) $static_libs || fail "static build of tp_mlp_ops.c failed (flags: $static_libs)"
  "$tmp/ops_static" 2 37 >"$tmp/ops.log" 2>&1 || { cat "$tmp/ops.log" >&2; fail "static tp_mlp_ops failed"; }
fi
echo "install_check: ok ($pc)"
