#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Stands in for `torchrun --nproc-per-node N PROGRAM ARGS` on one host: starts
# N processes with the variables torchrun gives its workers (RANK, WORLD_SIZE,
# LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, TORCHELASTIC_RUN_ID,
# MASTER_ADDR, MASTER_PORT) and none of tdrun's, waits for all, and exits with
# the first non-zero status. Like torchrun without --rdzv-id, the run id is
# "none" unless RUN_ID is set; MASTER_PORT tells concurrent jobs apart.
#   usage: fake_torchrun.sh N PROGRAM [ARGS...]
set -u
if [ $# -lt 2 ]; then
  echo "usage: fake_torchrun.sh N PROGRAM [ARGS...]" >&2
  exit 2
fi
n=$1
shift
run_id=${RUN_ID:-none}
port=${MASTER_PORT:-$((20000 + $$ % 40000))}
pids=""
i=0
while [ "$i" -lt "$n" ]; do
  env -u TD_RANK -u TD_WORLD_SIZE -u TD_LOCAL_RANK -u TD_LOCAL_WORLD_SIZE -u TD_JOB_ID -u TD_LAUNCHER \
    -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE \
    RANK="$i" WORLD_SIZE="$n" LOCAL_RANK="$i" LOCAL_WORLD_SIZE="$n" GROUP_RANK=0 ROLE_RANK="$i" \
    TORCHELASTIC_RUN_ID="$run_id" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$@" &
  pids="$pids $!"
  i=$((i + 1))
done
rc=0
for p in $pids; do
  wait "$p"
  s=$?
  if [ "$s" -ne 0 ] && [ "$rc" -eq 0 ]; then
    rc=$s
  fi
done
exit "$rc"
