"""Is FRM training bit-reproducible? Trains the same short FRM run (2,000 train pairs, 1 epoch, dev AUC every 10
steps over 300 dev pairs, seed 13, the built FRM's lexical statistics and POS cache) in separate processes and
compares the saved weights tensor by tensor.

``--threads N`` sets torch's intra-op threads of the process; ``core.rerank.frm.train_frm`` itself trains with
one thread on CPU (the fix this measures), so ``--raw`` calls the unwrapped loop to show why.

    .venv/bin/python -m bench.frm_threads [--runs 2] [--out bench/reports/frm_threads.json]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.reporting import head_commit, write_report

ROOT = Path(__file__).resolve().parent.parent


def train_once(out: str, threads: int, raw: bool) -> list:
    """One short FRM training into ``out``; returns its dev curve."""
    import torch

    from core.artifacts import load_json
    from core.data.datasets import load_dataset
    from core.registry import system_path
    from core.rerank import frm as F

    torch.set_num_threads(threads)
    ds = load_dataset("qqp-bimpm")
    built = system_path(ds.name, "frm")
    lex = load_json(built / "lexical_stats.json", "frm", "python -m core build --systems frm")
    stats = F.LexicalStats(lex["df"], int(lex["n_docs"]), float(lex["avgdl"]), float(lex["k1"]), float(lex["b"]))
    cfg = F.model_config(None)
    featurizer = F.Featurizer(stats, cfg.max_keywords, load_json(built / "pos_cache.json", "frm", "python -m core build"))
    tcfg = dataclasses.replace(F.FRMTrainConfig.for_profile("quick"), train_pairs=2000, max_epochs=1, eval_every=10,
                               dev_pairs=300)
    train = F._train_frm if raw else F.train_frm
    metrics = train(ds, cfg, tcfg, Path(out), featurizer=featurizer, resume=False)
    return [(p["step"], p["dev"]) for p in metrics["training"]["curve"]]


def same_weights(a: Path, b: Path) -> bool:
    import torch

    x = torch.load(a / "weights.pt", map_location="cpu", weights_only=True)["model"]
    y = torch.load(b / "weights.pt", map_location="cpu", weights_only=True)["model"]
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--child", nargs=3, metavar=("OUT", "THREADS", "RAW"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(ROOT / "bench" / "reports" / "frm_threads.json"))
    args = ap.parse_args(argv)
    if args.child:
        out, threads, raw = args.child
        print(json.dumps(train_once(out, int(threads), raw == "1")))
        return 0
    settings = [("unwrapped loop, 2 threads", 2, True), ("unwrapped loop, 1 thread", 1, True),
                ("train_frm (one thread on CPU), process at 2 threads", 2, False)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="frm-threads-") as tmp:
        for label, threads, raw in settings:
            folders, curves = [], []
            for run in range(args.runs):
                folder = Path(tmp) / f"{threads}-{int(raw)}-{run}"
                done = subprocess.run([sys.executable, "-m", "bench.frm_threads", "--child", str(folder), str(threads),
                                       "1" if raw else "0"], cwd=ROOT, capture_output=True, text=True, check=True)
                curves.append(json.loads(done.stdout.strip().splitlines()[-1]))
                folders.append(folder)
            identical = all(same_weights(folders[0], f) for f in folders[1:])
            rows.append({"setting": label, "threads": threads, "runs": args.runs, "identical_weights": identical,
                         "identical_curves": all(c == curves[0] for c in curves[1:]), "curves": curves})
            print(json.dumps({label: identical}), flush=True)
    report = {"command": ".venv/bin/python -m bench.frm_threads " + " ".join(argv if argv is not None else sys.argv[1:]),
              "commit": head_commit(), "machine": platform.platform(), "rows": rows,
              "protocol": "each run a separate process; 2,000 train pairs, 1 epoch (32 steps), dev AUC every 10 "
                          "steps over 300 dev pairs, seed 13, the built FRM's lexical statistics and POS cache"}
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
