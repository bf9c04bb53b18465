#!/usr/bin/env bash
# The test suite, then where hopper's and walker2d's GPU time goes, in one command from the project root (see
# benchmarks/GPU.md):
#   OUT=gpu_out BUDGET_S=560 bash benchmarks/gpu_solver.sh
# Installs the wheels carried in .whl/ (when present), then, one after the other:
#   1. the default test suite (SUITE_S, 300 s at most, SUITE_WORKERS 12);
#   2. on the then quiet machine, MJX physics throughput against the constraint solver's iterations
#      (benchmarks/solver_cost.py): hopper and walker2d with their models' settings and with fewer Newton iterations
#      and line-search steps, ant for scale, at 2,048 envs and, for the models' and the cheapest settings, 16,384;
#   3. hopper's model again with XLA's CUDA-graph command buffers extended to loops (+WHILE,+CONDITIONAL) and with
#      command buffers off, each in its own process (a flag value XLA does not know fails only that process);
#   4. the fused training-env rollout (auto-reset included) against raw physics for hopper and walker2d
#      (benchmarks/gpu_throughput.py, JAX only).
# Each measurement is time-boxed and skipped once the budget is spent. Logs and JSON lines land in $OUT.
set -u
OUT=${OUT:-gpu_out}
BUDGET_S=${BUDGET_S:-560}
source benchmarks/gpu_setup.sh

start_suite "${SUITE_S:-300}" "${SUITE_WORKERS:-12}"
wait $suite
echo "suite exit $? at $(elapsed) s" >>"$OUT/suite.log"
tail -25 "$OUT/suite.log"

# measure BOX_S ARGS...: one time-boxed solver_cost.py run, its rows appended to $OUT/solver.jsonl.
measure() {
  local box=$1; shift
  local left=$(( BUDGET_S - $(elapsed) ))
  [ "$box" -gt "$left" ] && box=$left
  if [ "$box" -lt 20 ]; then echo "skipped ($left s left): $*"; return; fi
  timeout -k 5 "$box" python3 benchmarks/solver_cost.py "$@" --steps 20 --repeats 3 --json "$OUT/solver.jsonl" 2>&1 \
    | grep -v "^\s*$" | tail -12
}
{
  load
  measure 70 --envs hopper walker2d --settings model 1/4 --num-envs 2048 16384
  measure 50 --envs hopper --settings 2/4 --num-envs 2048
  measure 50 --envs walker2d --settings 4/8 2/4 --num-envs 2048
  measure 30 --envs ant --settings model --num-envs 2048 16384
  load
  for flags in "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL" "--xla_gpu_enable_command_buffer="; do
    XLA_FLAGS="$flags" measure 30 --envs hopper --settings model --num-envs 2048 --label="$flags"
  done
  load
  left=$(( BUDGET_S - $(elapsed) ))
  if [ "$left" -gt 30 ]; then
    timeout -k 5 "$left" python3 benchmarks/gpu_throughput.py --envs hopper walker2d --num-envs 2048 \
      --torch-num-envs 1 --steps 50 --repeats 3 --json "$OUT/throughput.json" 2>&1 | grep -v "^\s*$" | tail -6
  fi
  load
} >"$OUT/solver.log" 2>&1
cat "$OUT/solver.log"
echo "done at $(elapsed) s"
