#!/usr/bin/env bash
# Train systems with a named profile (default: the papers' recipes, `paper`) on the bundled QQP data and
# evaluate them on the held-out test split with exact search (each query dropped from its own ranking),
# with paired significance tests (ranx). GPU-sized: core.training.device() picks CUDA when present.
#
# Usage: bench/paper_profiles.sh OUTDIR [PROFILE] SYSTEM[:VARIANT] ...
#   e.g. bench/paper_profiles.sh /tmp/out paper dual-encoder densetrans densetrans:-AllDense
# Writes OUTDIR/metrics-<system>[@variant].json (the build's metrics, learning curve included),
# OUTDIR/eval.json (bench/first_stage_eval.py) and OUTDIR/log.txt. BM25 (hard negatives) is built first.
set -u
OUT=${1:?outdir}; shift
PROFILE=${1:-paper}; shift || true
PY=${PY:-python3}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "[paper_profiles] $(date -u +%FT%TZ) profile=$PROFILE systems=$* commit=$(git rev-parse --short HEAD 2>/dev/null)"
$PY - <<'EOF'
import torch
print("[paper_profiles] torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
EOF
$PY -m core build --systems bm25
evals=(bm25)
for spec in "$@"; do
  system=${spec%%:*}; variant=""; [[ "$spec" == *:* ]] && variant=${spec#*:}
  start=$(date +%s)
  $PY -m core train --system "$system" ${variant:+--variant="$variant"} --profile "$PROFILE" --force \
    || echo "[paper_profiles] $spec FAILED"
  echo "[paper_profiles] $spec took $(( $(date +%s) - start )) s"
  $PY - "$system" "$variant" "$OUT" <<'EOF'
import shutil, sys
from pathlib import Path
from core.registry import system_dir
system, variant, out = sys.argv[1], sys.argv[2] or None, Path(sys.argv[3])
src = system_dir("qqp-bimpm", system, variant) / "metrics.json"
if src.is_file():
    shutil.copy(src, out / f"metrics-{system}{'@' + variant if variant else ''}.json")
EOF
  evals+=("$spec")
done
compare=()
for spec in "${evals[@]:1}"; do compare+=("bm25,$spec"); done
[[ -n "${COMPARE:-}" ]] && compare+=($COMPARE)
$PY bench/first_stage_eval.py --systems "${evals[@]}" --indexes flat --latency-queries 50 \
    --compare "${compare[@]}" --out "$OUT/eval.json" || echo "[paper_profiles] eval FAILED"
echo "[paper_profiles] done $(date -u +%FT%TZ)"
