#!/bin/bash
# On the accelerator machine, from the repository root, after `python -m bench.device.prepare` here:
#   bash bench/device/run.sh paper "$OUT"          the `paper` profile of each system, `core train` then `core eval`
#   bash bench/device/run.sh after-warmup "$OUT"   the same profile, patience counted after the warm-up
# Jobs run side by side (one GPU, 16 cores), each in its own artifacts folder; results.tgz holds the logs and the
# systems' JSON files; `python -m bench.device.summarise` turns them into bench/reports/paper_profiles_cuda.json.
set -u
MODE=${1:-paper}; FINAL=${2:-/tmp/gpuout}; WORK=/tmp/gpuwork; rm -rf "$WORK"; mkdir -p "$WORK" "$FINAL"
PY=${PY:-python3}
if ! $PY -c "import ranx" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
  export PYTHONPATH=$PWD:/tmp/site:$PWD/.gpu/site
fi
# JAX in the image would take most of the GPU's memory when a library imports it
export PYTHONUNBUFFERED=1 QRS_AUTOBUILD=0 OMP_NUM_THREADS=4 MKL_NUM_THREADS=4 XLA_PYTHON_CLIENT_PREALLOCATE=false
$PY - <<'P' > "$WORK/env.txt" 2>&1
import sys, numpy, torch
from core.training import device
print("python", sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__)
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-",
      "core.training.device():", device())
P
cat "$WORK/env.txt"
$PY -c "from core.cli.main import build_parser; build_parser()" || { tar czf "$FINAL/results.tgz" -C "$WORK" .; exit 3; }
job() {  # name dataset system k metrics
  local name=$1 ds=$2 sys=$3 k=$4 metrics=$5 var=/tmp/var-$1
  rm -rf "$var"; mkdir -p "$var"
  ( export QRS_VAR=$var; start=$SECONDS
    timeout -s INT "${TRAIN_LIMIT:-400}" $PY -m core train --dataset "$ds" --system "$sys" --profile paper > "$WORK/$name.log" 2>&1
    echo "train rc=$? seconds=$((SECONDS - start))" >> "$WORK/$name.log"
    timeout 90 $PY -m core eval --dataset "$ds" --system "$sys" --split test --k "$k" --metrics "$metrics" >> "$WORK/$name.log" 2>&1
    echo "eval rc=$?" >> "$WORK/$name.log"
    (cd "$var" && find systems -name '*.json' | tar czf "$WORK/$name-artifacts.tgz" -T -) )
}
if [ "$MODE" = paper ]; then
  for s in densetrans dual-encoder sdml-cnn; do job "$s" qqp-bimpm "$s" 100 "recall@100,hit_rate@1,mrr@100,map@20" & done
  job cnn-rerank trecqa cnn-rerank 1000 "map,mrr" &
else
  for s in densetrans dual-encoder; do
    ( export QRS_VAR=/tmp/var-$s; timeout -s INT "${TRAIN_LIMIT:-420}" $PY -m bench.device.patience_after_warmup "$s" \
        > "$WORK/$s-after-warmup.log" 2>&1; echo "rc=$?" >> "$WORK/$s-after-warmup.log" ) &
  done
fi
wait
tar czf "$FINAL/results.tgz" -C "$WORK" .
tail -n 12 "$WORK"/*.log
