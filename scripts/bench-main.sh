#!/bin/sh
# Benchmark of the main job, all in one run: tdist's overlapped plan and its
# sequential baseline (`tdist run`) and the same math with Open MPI +
# OpenBLAS (bench/mpi_tp_mlp.c), for examples/tp_mlp.td at 2 and 4 ranks.
#   scripts/bench-main.sh [BUILD] [ITERS] [ROUNDS]
# Each round runs every configuration once, alternating, so that load from
# other processes hits all of them alike; the table gives each one's median
# over rounds of its median over ITERS launches.
set -eu
BUILD=${1:-build}
ITERS=${2:-10}
ROUNDS=${3:-3}
M=512 H=1024 F=2752
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for r in $(seq "$ROUNDS"); do
  for n in 2 4; do
    "$BUILD/bin/tdist" run examples/tp_mlp.td --ranks "$n" --iters "$ITERS" --json "$TMP/td_${n}_$r.json" >/dev/null
    mpirun --allow-run-as-root --oversubscribe -n "$n" "$BUILD/bin/td_mpi_tp_mlp" "$M" "$H" "$F" "$ITERS" \
      | sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' > "$TMP/mpi_${n}_$r.txt"
  done
done
python3 - "$TMP" "$ROUNDS" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
print("ranks  overlapped_ms  sequential_ms  mpi_openblas_ms  vs_sequential  vs_mpi  comm_hidden")
for n in (2, 4):
    ov, sq, mpi, hid = [], [], [], []
    for r in range(1, rounds + 1):
        j = json.load(open(f"{tmp}/td_{n}_{r}.json"))
        ov.append(j["overlapped"]["seconds"] * 1e3)
        sq.append(j["sequential"]["seconds"] * 1e3)
        hid.append(j["overlapped"].get("comm_hidden_share", 0))
        mpi.append(float(open(f"{tmp}/mpi_{n}_{r}.txt").read()))
    o, s, m = statistics.median(ov), statistics.median(sq), statistics.median(mpi)
    print(f"{n:5d}  {o:13.2f}  {s:13.2f}  {m:15.2f}  {s/o:12.2f}x  {m/o:5.2f}x  {statistics.median(hid)*100:10.0f}%")
PY
