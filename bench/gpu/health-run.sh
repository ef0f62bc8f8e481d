#!/usr/bin/env bash
# GPU health validation runner; bench/gpu_validate.py renders the start script beside it.
# Usage: bench/gpu/health-run.sh OUT_DIR        (on the GPU machine: bash, python3 with torch, nvidia-ml-py and
# prometheus-client). Records NVML readings, runs the rendered start script (health gate, straggler test,
# all-reduce sweep, burn-in of TRAINSTACK_BURN_IN_S, training beside the metrics agent), scrapes the agent
# during the run and measures a second agent's cost over the burn-in.
set -uo pipefail
# Copied alone to the GPU machine (bench/gpu_validate.py), so no help.sh beside it: the same check inline.
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/!d;/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0" && exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
final=${1:?usage: bench/gpu/health-run.sh OUT_DIR}
# Everything is written to a staging folder and the main files copied out at the end (the lender returns at
# most 8 files); start.log goes to OUT_DIR directly, so a run cut short still shows how far it got.
out=/tmp/trainstack-health-stage
rm -rf "$out" && mkdir -p "$out" "$final"
# NVLink multicast stays off on shared hosts (the GPU lender's rule; harmless elsewhere).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# The GPU machine has no S3 endpoint: bucket transfers are logged, checkpoints stay local (start script hook).
export TRAINSTACK_DRY_RUN=1
export TRAINSTACK_WORKDIR="$here/work" TRAINSTACK_CHECKPOINT_DIR=/tmp/trainstack-health-ckpt
export TRAINSTACK_HOSTS_FILE=/tmp/trainstack-health-hosts TRAINSTACK_MIN_FREE_DISK_GB=1
export TRAINSTACK_STEPS=${TRAINSTACK_STEPS:-15000} TRAINSTACK_CHECKPOINT_EVERY=2000 TRAINSTACK_LOG_EVERY=500
export TRAINSTACK_BURN_IN_S=${TRAINSTACK_BURN_IN_S:-300}
cd "$TRAINSTACK_WORKDIR" || exit 1
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,pcie.link.gen.max,pcie.link.width.max \
    --format=csv,noheader
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  python3 -m pip show nvidia-ml-py prometheus-client 2>/dev/null | grep -E '^(Name|Version)'
  nproc
} >"$out/machine.txt" 2>&1
if [[ ${RECORD_NVML:-1} == 1 ]]; then
  python3 -m train.node.recorder --machine nvidia-h200-x2 --out "$out/nvml-recording.json" >"$out/recorder.log" 2>&1
fi

# The cost benchmark: a second agent (real NVML, 5 s) measured from /proc over the burn-in.
mkdir -p /tmp/bench-ckpt
python3 -m train.node.agent --port 9401 --bind 127.0.0.1 --interval-s 5 --checkpoint-dir /tmp/bench-ckpt \
  --jsonl /tmp/bench-agent.jsonl --device cuda 2>"$out/bench-agent.log" &
bench=$!
sleep 10  # let the benchmark agent start before its window opens
python3 "$here/agent_cost.py" "$bench" "${AGENT_COST_S:-240}" 5 >"$out/agent-cost.txt" 2>&1 &
cost=$!

started=$SECONDS
timeout 450 bash "$here/start-node-0.sh" >"$final/start.log" 2>&1 &
run=$!
python3 "$here/scrape_metrics.py" http://127.0.0.1:9400/metrics "$run" "$out/scrapes" 5 &
scraper=$!
python3 "$here/scrape_metrics.py" http://127.0.0.1:9401/metrics "$cost" "$out/bench-scrapes" 30 &
rc=0
wait "$run" || rc=$?
echo "start script exit code: $rc" >>"$final/start.log"
wait "$scraper"
# A lent machine is dear: when the start script stopped before training, still measure what it did not
# (the figures then come from the modules run directly, and the log says so).
if ! grep -q 'torchrun: ' "$final/start.log"; then
  export PYTHONPATH=$TRAINSTACK_WORKDIR CUDA_DEVICE_ORDER=PCI_BUS_ID
  burn=0
  if ((SECONDS - started < 60)) && [[ ${FALLBACK_BURN_IN:-1} == 1 ]]; then burn=$TRAINSTACK_BURN_IN_S; fi
  echo "fallback: the start script stopped before training; preflight (burn-in ${burn}s) and training run directly" |
    tee -a "$final/start.log"
  torchrun --standalone --nproc-per-node=2 -m train.node.preflight --record "$out/fallback-record.json" \
    --gemm-floor-tflops 495 --burn-in-s "$burn" >>"$final/start.log" 2>&1
  python3 -m train.node.agent --port 9400 --bind 127.0.0.1 --interval-s 5 --checkpoint-dir /tmp/bench-ckpt \
    --progress-file /tmp/fallback-progress.jsonl --jsonl "$out/fallback-agent.jsonl" 2>>"$final/start.log" &
  agent=$!
  TRAINSTACK_PROGRESS_FILE=/tmp/fallback-progress.jsonl torchrun --standalone --nproc-per-node=2 train/train.py \
    >>"$final/start.log" 2>&1 &
  train=$!
  python3 "$here/scrape_metrics.py" http://127.0.0.1:9400/metrics "$train" "$out/scrapes" 5
  kill -TERM "$agent"
  cp "$out/fallback-record.json" "$out/health-record.json" 2>/dev/null
fi
wait "$cost"
kill -TERM "$bench" 2>/dev/null
wait "$bench"
[[ -e $out/health-record.json ]] || cp logs/health-node-*.json "$out/health-record.json" 2>/dev/null
cp -r "$TRAINSTACK_WORKDIR/metrics" "$TRAINSTACK_WORKDIR/logs" /tmp/bench-agent.jsonl "$out/" 2>/dev/null
for f in machine.txt nvml-recording.json health-record.json agent-cost.txt scrapes/scrape-training.txt; do
  cp "$out/$f" "$final/" 2>/dev/null
done
tar -C "$out" -czf "$final/bundle.tgz" .
grep -E 'health gate|straggler|all-reduce|burn-in|torchrun|first step|done:|exit code|FATAL' "$final/start.log"
cat "$out/agent-cost.txt"
exit "$rc"
