#!/usr/bin/env bash
# The torch side's speed on one GPU and the checks only a GPU can make, in one command from the project root (see
# benchmarks/GPU.md):
#   OUT=gpu_out bash benchmarks/gpu_speed.sh
# Installs the wheels carried in .whl/ (when present), then, one part at a time on an otherwise quiet machine:
#   1. the `gpu` tests (tests/test_gpu.py): views both ways, stream order, every entry point on the GPU by default,
#      a non-finite action's catchable error, torch_ppo's training steps under torch.cuda.set_sync_debug_mode("error");
#   2. training steps/s of both trainers on `ant` with its GPU recipe, side by side (benchmarks/ppo_parity.py
#      --throughput --gpu-preset; torch_ppo with its compiled update);
#   3. where a torch_ppo training step's time goes, compiled and eager update (benchmarks/gpu_step_profile.py);
#   4. env stepping: raw physics, the fused JAX rollout (random actions and the same MLP in JAX), TorchEnv and the
#      TorchRL, RSL-RL and Gymnasium adapters driven by a torch MLP (benchmarks/gpu_throughput.py).
# Everything lands in $OUT: speed.log (all output), *.json (figures), a profiler trace.
set -u
OUT=${OUT:-gpu_out}
BUDGET_S=${BUDGET_S:-520}
source benchmarks/gpu_setup.sh
log="$OUT/speed.log"

# part NAME BOX_S COMMAND...: COMMAND's output appended to speed.log, Ctrl-C at BOX_S or at the budget's end.
part() {
  local name=$1 box=$2; shift 2
  local left=$(( BUDGET_S - $(elapsed) ))
  [ "$box" -gt "$left" ] && box=$left
  if [ "$box" -lt 30 ]; then echo "== $name: skipped, $left s left" >>"$log"; return; fi
  { echo; echo "== $name (up to $box s) $(load)"; } >>"$log"
  timeout -s INT -k 15 "$box" "$@" >>"$log" 2>&1
  echo "== $name: exit $? $(load)" >>"$log"
}

part gpu-tests "${TESTS_S:-150}" python3 -m pytest -v -m gpu tests/test_gpu.py -n 4 -rfE
part parity-ant "${PARITY_S:-170}" env JAX_PLATFORMS=cuda python3 benchmarks/ppo_parity.py --throughput \
  --gpu-preset --env ant --seeds 0 --interval 3 --readings 5 --set torch_compile=True --json "$OUT/parity_ant.json"
part profile-compiled "${PROFILE_S:-90}" env JAX_PLATFORMS=cuda python3 benchmarks/gpu_step_profile.py --env ant \
  --torch-compile true --json "$OUT/profile_ant_compiled.json" --trace "$OUT/profile_ant_compiled.trace.json.gz"
part throughput "${THROUGHPUT_S:-110}" env JAX_PLATFORMS=cuda python3 benchmarks/gpu_throughput.py --envs ant \
  --num-envs 4096 32768 --torch-num-envs 4096 32768 --steps 100 --repeats 3 --json "$OUT/throughput.json"
part profile-eager "${PROFILE_S:-90}" env JAX_PLATFORMS=cuda python3 benchmarks/gpu_step_profile.py --env ant \
  --torch-compile false --json "$OUT/profile_ant_eager.json"
echo "done at $(elapsed) s" >>"$log"
grep -E "^==|passed|failed|error|steady|torch / JAX|n=|wall|Error" "$log" | tail -60
