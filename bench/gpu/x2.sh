#!/usr/bin/env bash
# Everything the 2-GPU host runs in one call; `python -m bench.gpu_validate --plan x2 --out DIR` copies
# it to DIR/x2.sh beside two-nodes/ and one-node/. Usage: x2.sh OUT_DIR [steps...]
# Steps (default: all, in this order): machine fabric nvlink net onenode bench. Logs land in OUT_DIR/logs/,
# packed into OUT_DIR/logs.tar.gz; OUT_DIR/summary.txt holds the lines that matter.
set -uo pipefail
# Copied alone to the GPU machine (bench/gpu_validate.py), so no help.sh beside it: the same check inline.
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/!d;/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0" && exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: x2.sh OUT_DIR [steps...]}
shift
steps=("${@:-machine fabric nvlink net onenode bench}")
read -ra steps <<<"${steps[*]}"
logs="$out/logs"
mkdir -p "$logs"
# NVLink multicast stays off on shared hosts (the GPU lender's rule); every child inherits it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export TRAINSTACK_DATA_DIR=/tmp/trainstack-data
# reap: kill the sessions of node scripts a timed-out runner left behind (they would hold the ports).
reap() {
  local file session
  for file in /tmp/trainstack-2node/sessions /tmp/trainstack-gpu-sessions; do
    [[ -f $file ]] || continue
    while read -r session; do kill -KILL -- "-$session" 2>/dev/null || true; done <"$file"
    rm -f "$file"
  done
}
say() { printf '== %s %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$out/summary.txt"; }
python3 "$here/one-node/work/train/shards.py" "$TRAINSTACK_DATA_DIR" --shards 4 --tokens-per-shard 4000000 \
  >/dev/null || say "FAILED: synthetic shards"

machine() {
  {
    date -u +"date: %Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
      "nccl", ".".join(map(str, torch.cuda.nccl.version())), "gpus", torch.cuda.device_count())'
    echo "cpus: $(nproc)"
    echo "network interfaces:" /sys/class/net/*
    echo "rdma devices:" /sys/class/infiniband/*
    nvidia-smi topo -m
    nvidia-smi nvlink -s -i 0 | head -n 20
  } >"$logs/machine.txt" 2>&1
  tee -a "$out/summary.txt" <"$logs/machine.txt"
}

# A 2-node job on a host without ens1 or eth1, no override: the start script must refuse to start.
fabric() {
  local rc=0
  env -u TRAINSTACK_FABRIC_IFNAME CUDA_VISIBLE_DEVICES=1 TRAINSTACK_CHECKPOINT_DIR=/tmp/trainstack-fabric \
    TRAINSTACK_HOSTS_FILE=/tmp/trainstack-fabric-hosts TRAINSTACK_WORKDIR="$here/two-nodes/work" \
    timeout 60 bash "$here/two-nodes/start-node-1.sh" >"$logs/fabric-detect.log" 2>&1 || rc=$?
  echo "exit code: $rc" >>"$logs/fabric-detect.log"
  grep -h -E 'fabric|FATAL|exit code' "$logs/fabric-detect.log" | tee -a "$out/summary.txt"
}

# two_nodes TAG [VAR=value...]: run-2node.sh's resume scenario with extra environment, under the stack's
# all-reduce floor; if the preflight refuses the transport (the floor doing its job), that is recorded and
# the scenario runs again with a floor of 1 GB/s so that training and resume are still shown.
two_nodes() {
  local tag=$1 rc
  shift
  reap
  env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET TRAINSTACK_TERM_AFTER=20 \
    timeout 240 bash "$here/two-nodes/run-2node.sh" "$logs/$tag" resume >"$logs/$tag.log" 2>&1
  rc=$?
  say "$tag: exit code $rc"
  grep -h -E 'via (P2P|SHM|NET)' "$logs/$tag"/run1-node0.log | sed 's/.*NCCL INFO //' | sort | uniq -c |
    head -n 4 | tee -a "$out/summary.txt"
  grep -v NCCL "$logs/$tag.log" | tee -a "$out/summary.txt"
  if grep -q 'under the floor' "$logs/$tag"/run1-node0.log; then
    say "$tag: the preflight refused this transport under the stack's floor; again with a floor of 1 GB/s"
    two_nodes "$tag-floor1" "$@" TRAINSTACK_NCCL_MIN_BUSBW_GBPS=1
  fi
}

nvlink() { two_nodes nvlink; }

net() { two_nodes net NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1; }

onenode() { # onenode [VAR=value...]: run.sh's resume scenario on one node with both GPUs
  local tag=one-node${1:+-floor1}
  reap
  env "$@" TRAINSTACK_TERM_AFTER=20 timeout 240 bash "$here/one-node/run.sh" "$logs/$tag" >"$logs/$tag.log" 2>&1
  say "$tag: exit code $?"
  tee -a "$out/summary.txt" <"$logs/$tag.log"
  if [[ $# == 0 ]] && grep -q 'under the floor' "$logs/$tag/run1.log"; then
    say "$tag: the preflight refused NVLink under the stack's floor; again with a floor of 1 GB/s"
    onenode TRAINSTACK_NCCL_MIN_BUSBW_GBPS=1
  fi
}

bench_one() { # bench_one TAG NPROC ARGS...: train/gpt_train.py under torchrun directly, no checkpoints
  local tag=$1 nproc=$2
  shift 2
  (cd "$here/one-node/work" && TRAINSTACK_CHECKPOINT_DIR="/tmp/bench-$tag" timeout 240 \
    torchrun --standalone --nproc-per-node="$nproc" train/gpt_train.py --checkpoint-every 0 --log-every 10 "$@") \
    >"$logs/bench-$tag.log" 2>&1
  say "bench $tag: exit code $? $(grep -h TRAINSTACK_SUMMARY "$logs/bench-$tag.log")"
}

bench() {
  bench_one 350m-1gpu-ddp 1 --model gpt-350m --micro-batch 16 --steps 30 --sharding ddp
  bench_one 350m-2gpu-ddp 2 --model gpt-350m --micro-batch 16 --steps 30 --sharding ddp
  bench_one 350m-2gpu-fsdp 2 --model gpt-350m --micro-batch 16 --steps 30 --sharding fsdp
  bench_one 124m-1gpu-ddp 1 --model gpt-124m --micro-batch 16 --steps 30 --sharding ddp
}

# The archive is rewritten after each step: a call cut short still brings back what ran (files deeper than
# two folders under $OUT do not come back on their own).
for step in "${steps[@]}"; do
  say "step $step"
  "$step"
  reap
  tar -C "$out" -czf "$out/logs.tar.gz" logs
done
rm -rf "$logs"
say "done"
