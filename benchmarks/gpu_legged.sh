#!/usr/bin/env bash
# hopper and walker2d with PPO on a GPU, and Brax's own PPO beside ours on ant, in one command from the project root
# (see benchmarks/GPU.md):
#   OUT=gpu_out BUDGET_S=500 bash benchmarks/gpu_legged.sh
# Installs the wheels carried in .whl/ (Brax 0.14.2's among them), then runs side by side until BUDGET_S:
#   - the default test suite;
#   - hopper, then walker2d, with Brax's PPO recipe for humanoid (`--preset humanoid-gpu`; Brax's notebook trains
#     these two with SAC, and humanoid is the other task that pays for staying healthy and ends on a fall) and 30
#     evaluations instead of 10: the JAX trainer with seeds 0 and 1 (two queues), torch_ppo with seed 0 (a third);
#   - Brax 0.14.2's own PPO on ant with the ant-gpu recipe (benchmarks/brax_ppo_run.py), for reward against env
#     steps beside brax_core's ant runs (benchmarks/gpu_locomotion.sh).
# Every run is stopped with Ctrl-C at its time box or at the budget's end. The runs share the GPU and the CPU cores,
# so their wall times are upper bounds; their reward against env steps does not depend on that. Logs and run
# folders (metrics.jsonl, summary.json, config.json; no checkpoints) land in $OUT.
set -u
OUT=${OUT:-gpu_out}
source benchmarks/gpu_setup.sh
mkdir -p "$OUT/runs"
LEGGED_S=${LEGGED_S:-230}

start_suite "${SUITE_S:-330}" "${SUITE_WORKERS:-6}"
pids=()
for seed in 0 1; do
  { train "hopper-jax-s$seed" "$LEGGED_S" --env hopper --preset humanoid-gpu --trainer jax --seed "$seed" --num-evals 30
    train "walker2d-jax-s$seed" "$LEGGED_S" --env walker2d --preset humanoid-gpu --trainer jax --seed "$seed" \
      --num-evals 30; } >"$OUT/queue-jax-s$seed.log" 2>&1 &
  pids+=($!)
done
{ train hopper-torch-s0 "$LEGGED_S" --env hopper --preset humanoid-gpu --trainer torch --num-evals 30
  train walker2d-torch-s0 "$LEGGED_S" --env walker2d --preset humanoid-gpu --trainer torch --num-evals 30
} >"$OUT/queue-torch.log" 2>&1 &
pids+=($!)
timebox ant-brax-shared "$BUDGET_S" python3 benchmarks/brax_ppo_run.py --env ant --out "$OUT/runs/ant-brax-shared" \
  >"$OUT/queue-brax.log" 2>&1 &
pids+=($!)
wait $suite
echo "suite exit $? at $(elapsed) s" >>"$OUT/suite.log"
wait "${pids[@]}"
tail -12 "$OUT/suite.log"
tail -n 25 "$OUT"/queue-*.log
pack_runs
