#!/bin/sh
# Benchmark of the main job, all in one run: tdist's overlapped plan and its
# sequential baseline (`tdist run`) and the same math with Open MPI +
# OpenBLAS (bench/mpi_tp_mlp.c; libm GELU, and TD_MPI_GELU=fast: the exp form
# tdist's tiles use), for examples/tp_mlp.td at 2 and 4 ranks.
#   scripts/bench-main.sh [BUILD] [ITERS] [ROUNDS]
# Each round runs every configuration once, in turn (tdist runs its two plans
# twice inside one process, O S then S O), so that load from other processes hits all
# of them alike; the table gives each one's median over rounds of its median
# over ITERS launches, and the range of the 1-minute load average seen.
set -eu
BUILD=${1:-build}
ITERS=${2:-10}
ROUNDS=${3:-3}
M=512 H=1024 F=2752
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mpi() { # ranks gelu round
  TD_MPI_GELU=$2 mpirun --allow-run-as-root --oversubscribe -x TD_MPI_GELU -n "$1" "$BUILD/bin/td_mpi_tp_mlp" \
    "$M" "$H" "$F" "$ITERS" | sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' > "$TMP/mpi_$2_$1_$3.txt"
}
for r in $(seq "$ROUNDS"); do
  for n in 2 4; do
    cut -d' ' -f1 /proc/loadavg >> "$TMP/load.txt"
    "$BUILD/bin/tdist" run examples/tp_mlp.td --ranks "$n" --iters "$ITERS" --rounds 2 \
      --json "$TMP/td_${n}_$r.json" >/dev/null
    mpi "$n" libm "$r"
    mpi "$n" fast "$r"
  done
done
python3 - "$TMP" "$ROUNDS" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
load = [float(x) for x in open(f"{tmp}/load.txt")]
print(f"load average (1 min) during the run: {min(load):.2f} .. {max(load):.2f}")
print("ranks  overlapped_ms  sequential_ms  mpi_openblas_ms  mpi_fast_gelu_ms  vs_sequential  vs_mpi  vs_mpi_fast")
pairs = {}
for n in (2, 4):
    ov, sq, mpi, mpf = [], [], [], []
    for r in range(1, rounds + 1):
        j = json.load(open(f"{tmp}/td_{n}_{r}.json"))
        ov.append(j["overlapped"]["seconds"] * 1e3)
        sq.append(j["sequential"]["seconds"] * 1e3)
        mpi.append(float(open(f"{tmp}/mpi_libm_{n}_{r}.txt").read()))
        mpf.append(float(open(f"{tmp}/mpi_fast_{n}_{r}.txt").read()))
    o, s, m, f = (statistics.median(x) for x in (ov, sq, mpi, mpf))
    print(f"{n:5d}  {o:13.2f}  {s:13.2f}  {m:15.2f}  {f:16.2f}  {s/o:12.3f}x  {m/o:5.2f}x  {f/o:10.2f}x")
    pairs[n] = [b / a for a, b in zip(ov, sq)]
# Paired: the two plans ran in the same process one after the other in every
# round, so the per-round ratio cancels most of the load that moves between
# rounds. Sign test: the chance of at least that many wins for the overlapped
# plan if neither plan were faster (two-sided, exact binomial).
from math import comb
for n, rs in pairs.items():
    wins, k = sum(r > 1 for r in rs), len(rs)
    tail = sum(comb(k, i) for i in range(max(wins, k - wins), k + 1)) / 2 ** k
    print(f"{n} ranks, sequential / overlapped per round: median {statistics.median(rs):.3f}x, "
          f"range {min(rs):.3f} .. {max(rs):.3f}; overlapped faster in {wins} of {k} rounds "
          f"(sign test p = {min(1.0, 2 * tail):.3g})")
PY
