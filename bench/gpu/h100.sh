#!/usr/bin/env bash
# The one-GPU H100 call of issue #69, in one command, from the repository root on the GPU machine.
# Usage: bash DIR/h100.sh OUT_DIR [figures validate sweep]
# DIR holds what `python -m bench.gpu_validate --gpus 1 --out DIR/validate` rendered, bench/gpu_figures.py
# and bench/gpu_sweep.py. Parts, each under its own time limit, records written as they come:
#   figures   bf16 GEMM at the gate's size (the gate's own function, repeated) and the step model's shapes,
#             HBM copy bandwidth: OUT_DIR/figures.json
#   validate  NVML recording, then the rendered start script twice (run.sh: health gate, straggler GEMM,
#             all-reduce sweep, burn-in of TRAINSTACK_BURN_IN_S, training beside the metrics agent, SIGTERM,
#             resume), the agent scraped meanwhile: OUT_DIR/validate.tgz
#   sweep     bench/gpu_sweep.py's H100 plan until the call's time runs out: OUT_DIR/sweep.json
# nvidia-smi reads the SM clock, power and temperature every 250 ms throughout: OUT_DIR/smi.csv.gz.
set -uo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/!d;s/^# \{0,1\}//;p}' "$0" && exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: h100.sh OUT_DIR [figures validate sweep]}
shift
parts=${*:-figures validate sweep}
mkdir -p "$out"
# NVLink multicast stays off on shared hosts (the GPU lender's rule; harmless elsewhere).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
stage=/tmp/trainstack-h100
rm -rf "$stage" && mkdir -p "$stage/figures" "$stage/validate" "$stage/sweep"
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit,clocks.max.sm,clocks.max.mem \
    --format=csv,noheader | sed 's/^/gpu: /'
  python3 -c 'import torch; print("torch:", torch.__version__, "cuda:", torch.version.cuda, "nccl:", ".".join(map(str, torch.cuda.nccl.version())))'
  python3 -m pip show transformers peft nvidia-ml-py prometheus-client 2>/dev/null | grep -E '^(Name|Version)'
  nproc
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
  --format=csv -lms 250 >"$stage/smi.csv" 2>&1 &
smi=$!
mark() { echo "$(date -u +%H:%M:%S) ${SECONDS}s $*" | tee -a "$out/parts.log"; }

if [[ $parts == *figures* ]]; then
  mark "figures: start"
  OUT=$stage/figures PYTHONPATH=$PWD timeout 150 python3 "$here/gpu_figures.py" 2>&1 | tee "$stage/figures/figures.log"
  cp "$stage/figures/figures.json" "$out/" 2>/dev/null
  mark "figures: end"
fi

if [[ $parts == *validate* ]]; then
  mark "validate: start"
  PYTHONPATH=$here/validate/work timeout 60 python3 -m train.node.recorder --machine nvidia-h100-x1 \
    --out "$stage/validate/nvml-recording.json" >"$stage/validate/recorder.log" 2>&1
  TRAINSTACK_BURN_IN_S=${TRAINSTACK_BURN_IN_S:-30} TRAINSTACK_STEPS=${TRAINSTACK_STEPS:-20000} \
    TRAINSTACK_TERM_AFTER=2000 timeout 260 bash "$here/validate/run.sh" "$stage/validate" &
  run=$!
  python3 bench/gpu/scrape_metrics.py http://127.0.0.1:9400/metrics "$run" "$stage/validate/scrapes" 5 &
  scraper=$!
  rc=0
  wait "$run" || rc=$?
  wait "$scraper"
  mark "validate: run.sh exit code $rc"
  # A run cut short by the timeout leaves its start script's session (run.sh starts each with setsid).
  while read -r session; do kill -TERM -- "-$session" 2>/dev/null; done </tmp/trainstack-gpu-sessions
  cp -r "$here/validate/work/logs" "$here/validate/work/metrics" "$stage/validate/" 2>/dev/null
  tar -C "$stage" -czf "$out/validate.tgz" validate
fi

if [[ $parts == *sweep* ]]; then
  budget=$((500 - SECONDS))
  ((budget > 30)) || budget=30
  mark "sweep: start, budget ${budget}s"
  OUT=$stage/sweep SWEEP_PLAN=${SWEEP_PLAN:-h100} SWEEP_BUDGET_S=$budget timeout $((budget + 60)) python3 "$here/gpu_sweep.py" \
    >"$stage/sweep/sweep.log" 2>&1
  mark "sweep: exit code $? after $(grep -c "'shape'" "$stage/sweep/sweep.log") runs"
  cp "$stage/sweep/sweep.json" "$stage/sweep/sweep.log" "$out/" 2>/dev/null
fi

kill "$smi" 2>/dev/null
gzip -c "$stage/smi.csv" >"$out/smi.csv.gz"
mark "done"
