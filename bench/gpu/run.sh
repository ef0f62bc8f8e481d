#!/usr/bin/env bash
# GPU validation runner; bench/gpu_validate.py copies it beside the rendered start script.
# Usage: run.sh OUT_DIR
set -euo pipefail
# Copied alone to the GPU machine (bench/gpu_validate.py), so no help.sh beside it: the same check inline.
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/!d;/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0" && exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: run.sh OUT_DIR}
mkdir -p "$out"
# NVLink multicast stays off on shared hosts (the GPU lender's rule; harmless elsewhere).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The GPU machine has no S3 endpoint: bucket transfers are logged, checkpoints stay local (start script hook).
export TRAINSTACK_DRY_RUN=1
export TRAINSTACK_WORKDIR="$here/work" TRAINSTACK_CHECKPOINT_DIR=/tmp/trainstack-gpu-ckpt
export TRAINSTACK_HOSTS_FILE=/tmp/trainstack-gpu-hosts TRAINSTACK_MIN_FREE_DISK_GB=1
export TRAINSTACK_STEPS=${TRAINSTACK_STEPS:-20000} TRAINSTACK_CHECKPOINT_EVERY=${TRAINSTACK_CHECKPOINT_EVERY:-500}
TRAINSTACK_TERM_AFTER=${TRAINSTACK_TERM_AFTER:-2000}
export PYTHONUNBUFFERED=1 TRAINSTACK_LOG_EVERY=${TRAINSTACK_LOG_EVERY:-1000}
rm -rf "$TRAINSTACK_CHECKPOINT_DIR"
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/gpu: /' || true
  python3 -c 'import torch; print("torch:", torch.__version__, "cuda:", torch.version.cuda, "nccl:", ".".join(map(str, torch.cuda.nccl.version())))'
} | tee "$out/machine.txt"

# Run 1: preflight + training, stopped by SIGTERM (as a spot preemption) once a checkpoint past step
# TRAINSTACK_TERM_AFTER exists.
newest_step() {
  find "$TRAINSTACK_CHECKPOINT_DIR" -name 'step-*.pt' 2>/dev/null | sed -n 's/.*step-0*\([0-9][0-9]*\)\.pt$/\1/p' \
    | sort -n | tail -n 1
}
# The script runs in a session of its own: the signal reaches the script alone (as RunPod's reaches a
# container's command), and `drain` can wait for what it leaves running (a torchrun still saving).
sessions=/tmp/trainstack-gpu-sessions # for a caller that must clean up after a timeout
setsid bash "$here/start-node-0.sh" >"$out/run1.log" 2>&1 &
pid=$!
echo "$pid" >>"$sessions"
drain() {
  local deadline=$((SECONDS + 120))
  while kill -0 -- "-$1" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
}
deadline=$((SECONDS + 300))
until (($(newest_step) + 0 >= TRAINSTACK_TERM_AFTER)); do
  [[ $(ps -o stat= -p "$pid") =~ ^[^Z] ]] || break # exited (a zombie until `wait`)
  ((SECONDS < deadline)) || { echo "run 1: no checkpoint past step $TRAINSTACK_TERM_AFTER in 300 s" >&2; break; }
  sleep 0.2
done
kill -TERM "$pid" 2>/dev/null || true
rc1=0; wait "$pid" || rc1=$?
drain "$pid"
echo "run 1 exit code: $rc1" | tee -a "$out/run1.log"

# Run 2: the same script again must resume from the newest checkpoint and finish.
setsid bash "$here/start-node-0.sh" >"$out/run2.log" 2>&1 &
pid=$!
echo "$pid" >>"$sessions"
rc2=0; wait "$pid" || rc2=$?
echo "run 2 exit code: $rc2" | tee -a "$out/run2.log"
find "$TRAINSTACK_CHECKPOINT_DIR" -name 'step-*.pt' | sort | tee "$out/checkpoints.txt"
grep -h -E 'all-reduce|GPUs|disk|first step|step [0-9]+ loss|stopping|done:|TRAINSTACK_SUMMARY|exit code|FATAL' \
  "$out"/run*.log
((rc2 == 0))
