#!/usr/bin/env bash
# The GPU check in one command, from the project root on a CUDA machine (see benchmarks/GPU.md):
#   OUT=gpu_out bash benchmarks/gpu_check.sh
# Installs the wheels carried in .whl/ (when present), then:
#   1. the default test suite (JAX's default device stays the CPU; the `gpu` tests use the GPU), while ant trains
#      with Brax's GPU recipe, first by the JAX trainer, then by torch_ppo (JAX on the GPU, --device auto);
#   2. on a quiet machine: env stepping throughput (benchmarks/gpu_throughput.py);
#   3. the main job (`brax-bridge compare --env inverted_pendulum`) with the time left.
# Logs and run summaries land in $OUT (runs.tar.gz holds each run's config, metrics and summary).
set -u
OUT=${OUT:-gpu_out}
BUDGET_S=${BUDGET_S:-570}
source benchmarks/gpu_setup.sh

# Brax's ant recipe (presets.GPU_PRESETS["ant"]: 4096 envs, batch 2048, 32 minibatches, unroll 5, 4 passes, reward
# scaling 10, entropy 1e-2, its default networks), 30M env steps here.
ANT=(--env ant --preset ant-gpu --num-timesteps "${ANT_STEPS:-30000000}" --num-evals 11)
mkdir -p "$OUT/runs"

start_suite "${SUITE_S:-300}" "${SUITE_WORKERS:-10}"
{
  for trainer in jax torch; do
    load
    timeout -s INT -k 20 "${ANT_S:-120}" python3 -m brax_bridge_app.cli train "${ANT[@]}" --trainer $trainer \
      --out "$OUT/runs/ant-$trainer" 2>&1 | grep -v "^\s*$" | tail -40
    load
  done
} >"$OUT/learning.log" 2>&1
wait $suite
echo "suite exit $? at $(elapsed) s" >>"$OUT/suite.log"
tail -15 "$OUT/suite.log"
tail -30 "$OUT/learning.log"

load >"$OUT/throughput.log"
timeout -k 10 "${THROUGHPUT_S:-110}" python3 benchmarks/gpu_throughput.py --envs ant humanoid \
  --num-envs 4096 32768 --torch-num-envs 4096 --steps 100 --repeats 3 --json "$OUT/throughput.json" \
  >>"$OUT/throughput.log" 2>&1
load >>"$OUT/throughput.log"
cat "$OUT/throughput.log"

left=$(( BUDGET_S - $(elapsed) ))
if [ "$left" -gt 45 ]; then
  load >"$OUT/compare.log"
  timeout -s INT -k 10 "$left" python3 -m brax_bridge_app.cli compare --env inverted_pendulum --out "$OUT/runs/compare" \
    >>"$OUT/compare.log" 2>&1
  echo "compare exit $? at $(elapsed) s" >>"$OUT/compare.log"
  tail -25 "$OUT/compare.log"
fi
pack_runs
