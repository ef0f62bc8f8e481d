#!/usr/bin/env bash
# Two-node validation runner on one GPU host; bench/gpu_validate.py --nodes 2 copies it beside the
# rendered start-node-0.sh and start-node-1.sh. Node N runs pinned to GPU N (CUDA_VISIBLE_DEVICES), with its
# own checkpoint directory and hosts file, as a separate machine would; rank 0 is the master at 127.0.0.1.
# Usage: run-2node.sh OUT_DIR [resume|once]
#   resume (default): both nodes start; once a checkpoint past step TRAINSTACK_TERM_AFTER exists, node
#     TRAINSTACK_TERM_NODE (default 1) gets SIGTERM (a spot preemption); then both start again and must resume
#     from the newest checkpoint and finish.
#   once: both nodes start once, no signal (e.g. to show the preflight refusing a slow transport).
# The fabric interface defaults to lo (the host has no ens1); NCCL_* set by the caller pass through.
set -euo pipefail
# Copied alone to the GPU machine (bench/gpu_validate.py), so no help.sh beside it: the same check inline.
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/!d;/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0" && exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: run-2node.sh OUT_DIR [resume|once]}
mode=${2:-resume}
mkdir -p "$out"
# NVLink multicast stays off on shared hosts (the GPU lender's rule; harmless elsewhere).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The GPU machine has no S3 endpoint: bucket transfers are logged, checkpoints stay local (start script hook).
export TRAINSTACK_DRY_RUN=1
export TRAINSTACK_WORKDIR="$here/work" TRAINSTACK_MIN_FREE_DISK_GB=1 PYTHONUNBUFFERED=1
export TRAINSTACK_FABRIC_IFNAME=${TRAINSTACK_FABRIC_IFNAME:-lo}
term_after=${TRAINSTACK_TERM_AFTER:-20}
term_node=${TRAINSTACK_TERM_NODE:-1}
state=${TRAINSTACK_2NODE_DIR:-/tmp/trainstack-2node}
rm -rf "$state"
mkdir -p "$state"
pids=()

# start_node RANK LOG: the node's script in a session of its own (a signal reaches the script alone, as
# RunPod's reaches a container's command), pinned to GPU RANK.
start_node() {
  CUDA_VISIBLE_DEVICES=$1 TRAINSTACK_CHECKPOINT_DIR="$state/ckpt-node-$1" \
    TRAINSTACK_HOSTS_FILE="$state/hosts-node-$1" setsid bash "$here/start-node-$1.sh" >"$2" 2>&1 &
  pids[$1]=$!
  echo "${pids[$1]}" >>"$state/sessions" # for a caller that must clean up after a timeout
}

newest_step() {
  find "$state" -name 'step-*.pt' 2>/dev/null | sed -n 's/.*step-0*\([0-9][0-9]*\)\.pt$/\1/p' |
    sort -n | tail -n 1
}

# alive PID / group_alive PID: running, not a zombie (an exited child stays one until `wait` reaps it).
alive() { [[ $(ps -o stat= -p "$1" 2>/dev/null) =~ ^[^Z] ]]; }
# shellcheck disable=SC2009  # pgrep cannot tell zombies apart
group_alive() { ps -o stat= -g "$1" 2>/dev/null | grep -q '^[^Z]'; }

# stop_group PID GRACE_S: wait up to GRACE_S for the script PID's whole session to end, then kill it all
# (what was still running goes to the log first).
stop_group() {
  local deadline=$((SECONDS + $2))
  while group_alive "$1" && ((SECONDS < deadline)); do sleep 0.2; done
  if group_alive "$1"; then
    echo "still running $2 s later (killed now):"
    ps -o pid=,etime=,args= -g "$1" || true
    kill -KILL -- "-$1" 2>/dev/null || true
  fi
}

# finish TAG [PATIENCE_S]: wait for both scripts; one still running PATIENCE_S after the other exited gets
# SIGTERM (after a peer's preemption, torchrun waits up to 300 s in its exit barrier), then both sessions
# get 60 s to end (a torchrun still saving) before they are killed.
finish() {
  local r rc deadline patience=${2:-100000}
  while alive "${pids[0]}" && alive "${pids[1]}"; do sleep 0.2; done
  deadline=$((SECONDS + patience))
  for r in 0 1; do
    while alive "${pids[$r]}" && ((SECONDS < deadline)); do sleep 0.2; done
    if alive "${pids[$r]}"; then
      echo "$1 node $r: still running ${patience} s after its peer stopped; SIGTERM (both restart)" |
        tee -a "$out/events.txt" "$out/$1-node$r.log"
      kill -TERM "${pids[$r]}"
    fi
    stop_group "${pids[$r]}" 60 >>"$out/$1-node$r.log"
    rc=0
    wait "${pids[$r]}" || rc=$?
    echo "$1 node $r exit code: $rc" | tee -a "$out/$1-node$r.log"
  done
}

pair() {
  start_node 0 "$out/$1-node0.log"
  start_node 1 "$out/$1-node1.log"
}

if [[ $mode == once ]]; then
  pair once
  finish once
  exit 0
fi

pair run1
deadline=$((SECONDS + 300))
until (($(newest_step) + 0 >= term_after)); do
  if ! alive "${pids[0]}" || ! alive "${pids[1]}"; then break; fi
  ((SECONDS < deadline)) || { echo "run 1: no checkpoint past step $term_after in 300 s" >&2; break; }
  sleep 0.2
done
echo "run 1: newest checkpoint step $(newest_step); SIGTERM to node $term_node" | tee "$out/events.txt"
kill -TERM "${pids[$term_node]}" 2>/dev/null || true
finish run1 30
find "$state" -name 'step-*.pt' | sort | tee -a "$out/events.txt"
pair run2
finish run2
find "$state" -name 'step-*.pt' | sort | tee -a "$out/events.txt"
grep -h -E 'fabric|GPUs|all-reduce|first step|stopping|SIGTERM|TRAINSTACK_SUMMARY|exit code|FATAL' \
  "$out"/run*-node*.log
grep -q 'resumed from' "$out/run2-node0.log"
grep -q 'run2 node 0 exit code: 0' "$out/run2-node0.log" && grep -q 'run2 node 1 exit code: 0' "$out/run2-node1.log"
