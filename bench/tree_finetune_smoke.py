"""Smoke run of the minilm "finetuned" training loop on real QQP data with a tiny config (not a result).

Usage: QRS_VAR=/tmp/qrs_ft .venv/bin/python bench/tree_finetune_smoke.py
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import time, torch, tempfile
from pathlib import Path
torch.set_num_threads(1)
from core.data.datasets import load_dataset
from core.retrieval.bert import MiniLMConfig, finetune
ds = load_dataset("qqp-bimpm")
cfg = MiniLMConfig(finetune=True, epochs=1, train_pairs=64, dev_queries=30)
folder = Path(tempfile.mkdtemp())
t=time.time()
m = finetune(ds, cfg, folder)
print(m, time.time()-t, sorted(p.name for p in folder.iterdir()))
