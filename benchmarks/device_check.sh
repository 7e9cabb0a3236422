#!/usr/bin/env bash
# One command for a lent GPU (well under 10 minutes on an H200): the Qwen2.5-VL-7B-shaped model
# (random weights, bf16) behind HFBackend, the real Qwen2.5-VL processor settings, 512 photos x
# 2 conditions through SuiteRun, in sequence and pipelined; prints the busy fraction, queries/s
# and the share of the bf16 peak, then the raw forward's throughput by batch for comparison.
#
#     bash benchmarks/device_check.sh            # on the GPU machine, from the repository root
#     DEVICE=cpu EXTRA=--shrink SAMPLES=8 BATCHES=2 bash benchmarks/device_check.sh  # on a CPU
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's benchc, not an installed one
DEVICE="${DEVICE:-cuda}"
SAMPLES="${SAMPLES:-512}"
EXTRA="${EXTRA:-}"
BATCHES="${BATCHES:-8 16 32}"
ATTN=sdpa
if python -c "import flash_attn" 2>/dev/null; then ATTN=flash_attention_2; fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python -c "import os; print('cores', os.cpu_count(), 'load', os.getloadavg())"
# shellcheck disable=SC2086
timeout 420 python benchmarks/bench_models.py pipeline --device "$DEVICE" --samples "$SAMPLES" \
    --conditions 2 --batch 16 --attn "$ATTN" $EXTRA
# shellcheck disable=SC2086
timeout 150 python benchmarks/bench_models.py config --device "$DEVICE" --batches $BATCHES \
    --attn "$ATTN" --repeat 2 $EXTRA
