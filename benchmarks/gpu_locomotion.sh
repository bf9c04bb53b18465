#!/usr/bin/env bash
# Locomotion with Brax's own PPO recipes on a GPU, in one command from the project root (see benchmarks/GPU.md):
#   OUT=gpu_out bash benchmarks/gpu_locomotion.sh
# Installs the wheels carried in .whl/ (when present), then runs side by side until BUDGET_S:
#   - the default test suite (JAX's default device stays the CPU; the `gpu` tests use the GPU);
#   - two queues of training runs sharing the GPU, each with Brax's PPO recipe for its env (`brax-bridge train
#     --preset <env>-gpu`, see presets.GPU_PRESETS; JAX on the GPU, --device auto):
#       ant (JAX trainer), then ant (torch_ppo);
#       humanoid (JAX trainer), then halfcheetah (JAX trainer).
# Every run is stopped with Ctrl-C (checkpoint kept, summary written) at its time box or at the budget's end.
# The runs share the GPU and the CPU cores with each other and with the suite, so their wall times are upper bounds;
# their reward against env steps does not depend on that. Logs and run folders (metrics.jsonl, summary.json,
# config.json; no checkpoints) land in $OUT.
set -u
OUT=${OUT:-gpu_out}
source benchmarks/gpu_setup.sh
mkdir -p "$OUT/runs"

start_suite "${SUITE_S:-330}" "${SUITE_WORKERS:-8}"
{ train ant-jax-shared "${ANT_S:-200}" --env ant --preset ant-gpu --trainer jax
  train ant-torch-shared "${ANT_TORCH_S:-240}" --env ant --preset ant-gpu --trainer torch; } >"$OUT/queue1.log" 2>&1 &
queue1=$!
{ train humanoid-jax-shared "${HUMANOID_S:-280}" --env humanoid --preset humanoid-gpu --trainer jax
  train halfcheetah-jax-shared "${HALFCHEETAH_S:-220}" --env halfcheetah --preset halfcheetah-gpu --trainer jax
} >"$OUT/queue2.log" 2>&1 &
queue2=$!
wait $suite
echo "suite exit $? at $(elapsed) s" >>"$OUT/suite.log"
wait $queue1 $queue2
tail -12 "$OUT/suite.log"
tail -n 40 "$OUT/queue1.log" "$OUT/queue2.log"
pack_runs
