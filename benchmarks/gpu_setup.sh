# Sourced by the GPU scripts (gpu_check.sh, gpu_locomotion.sh, gpu_legged.sh) from the project root, with OUT set:
# installs the wheels carried in .whl/ (when present) into /tmp/site, records the machine in $OUT/info.txt, and
# defines `elapsed` (seconds since sourcing), `load` (that and the load average, for the logs), `timebox`, `train`,
# `start_suite` and `pack_runs`. BUDGET_S (default 520) is the time every time-boxed run must end within.
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
unset JAX_PLATFORMS
BUDGET_S=${BUDGET_S:-520}
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
load() { echo "[$(elapsed) s] load $(cut -d' ' -f1-3 /proc/loadavg)"; }

if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=$PWD:/tmp/site
fi
{
  nvidia-smi -L; nproc; date -u
  python3 -c "import jax, torch, mujoco, sys; print(sys.version.split()[0], 'jax', jax.__version__, jax.devices(),
'torch', torch.__version__, torch.cuda.get_device_name(), 'mujoco', mujoco.__version__)"
} >"$OUT/info.txt" 2>&1
cat "$OUT/info.txt"

# timebox NAME BOX_S COMMAND...: runs COMMAND, sent Ctrl-C at BOX_S seconds or at the budget's end, whichever comes
# first (skipped when under 60 s are left); prints the end of its output.
timebox() {
  local name=$1 box=$2; shift 2
  local left=$(( BUDGET_S - $(elapsed) ))
  [ "$box" -gt "$left" ] && box=$left
  if [ "$box" -lt 60 ]; then echo "$name: skipped, $left s left"; return; fi
  load; echo "$name: up to $box s"
  timeout -s INT -k 40 "$box" "$@" 2>&1 | grep -v "^\s*$" | tail -30
  load
}

# train NAME BOX_S ARGS...: one `brax-bridge train ARGS` run into $OUT/runs/NAME, time-boxed.
train() {
  local name=$1 box=$2; shift 2
  timebox "$name" "$box" python3 -m brax_bridge_app.cli train "$@" --out "$OUT/runs/$name"
}

# start_suite TIMEOUT_S WORKERS: the default test suite in the background, logged to $OUT/suite.log; its pid in $suite.
start_suite() {
  load >"$OUT/suite.log"
  timeout -k 10 "$1" python3 -m pytest -v -n "$2" --dist worksteal --max-worker-restart 4 -rfE >>"$OUT/suite.log" 2>&1 &
  suite=$!
}

# pack_runs: $OUT/runs (configs, metrics, summaries; no checkpoints) into $OUT/runs.tar.gz, the folder removed.
pack_runs() {
  tar -czf "$OUT/runs.tar.gz" -C "$OUT" --exclude='checkpoint*' --exclude='*.pkl' --exclude='*.pt' runs 2>/dev/null
  rm -rf "$OUT/runs"
  echo "done at $(elapsed) s"
}
