#!/bin/sh
# CI smoke run of the `.td` parser fuzzer: builds fuzz/parse_fuzz.c and the
# compiler's sources with clang (-fsanitize=fuzzer,address,undefined) into
# BUILD_DIR and runs it for SECONDS (default 30) from the seed corpus
# (fuzz/corpus plus examples/*.td). Exit status non-zero on any finding.
#   fuzz/smoke.sh [BUILD_DIR] [SECONDS]
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$SRC/build-fuzz}
SECS=${2:-30}
CC=${CLANG:-clang}
mkdir -p "$OUT/include/tdist" "$OUT/corpus"
sed -e 's/@PROJECT_VERSION_MAJOR@/0/;s/@PROJECT_VERSION_MINOR@/1/;s/@PROJECT_VERSION_PATCH@/0/;s/@PROJECT_VERSION@/0.1.0/' \
  "$SRC/include/tdist/version.h.in" > "$OUT/include/tdist/version.h"
CJSON_CFLAGS=$(pkg-config --cflags libcjson 2>/dev/null || true)
CJSON_LIBS=$(pkg-config --libs libcjson 2>/dev/null || echo -lcjson)
# shellcheck disable=SC2086
"$CC" -std=c17 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$SRC/include" -I"$OUT/include" -I"$SRC/src" $CJSON_CFLAGS \
  "$SRC/fuzz/parse_fuzz.c" "$SRC/fuzz/runtime_stubs.c" "$SRC"/src/core/status.c "$SRC"/src/core/types.c "$SRC"/src/core/file.c "$SRC"/src/core/suggest.c \
  "$SRC"/src/compiler/program.c "$SRC"/src/compiler/parse.c "$SRC"/src/compiler/lower*.c \
  "$SRC"/src/compiler/model.c "$SRC"/src/compiler/explain.c \
  "$SRC"/src/exec/schedule.c "$SRC"/src/exec/schedule_validate.c "$SRC"/src/exec/schedule_text.c \
  "$SRC"/src/exec/gemm_queue_cfg.c \
  $CJSON_LIBS -lm -o "$OUT/parse_fuzz"
cp "$SRC"/fuzz/corpus/* "$SRC"/examples/*.td "$OUT/corpus/" 2>/dev/null || true
exec "$OUT/parse_fuzz" -max_total_time="$SECS" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$OUT/" "$OUT/corpus"
