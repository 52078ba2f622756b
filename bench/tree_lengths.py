"""WordPiece lengths of the QQP collection under the MiniLM tokenizer (choice of max length 64).

Usage: .venv/bin/python bench/tree_lengths.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from core.data.datasets import load_dataset  # noqa: E402
from core.retrieval.bert import load_backbone  # noqa: E402

tokenizer, _ = load_backbone()
lengths = np.array([len(ids) for ids in tokenizer(list(load_dataset("qqp-bimpm").corpus.values()))["input_ids"]])
print({"questions": len(lengths), "mean": round(float(lengths.mean()), 2),
       "p50_p90_p99": np.percentile(lengths, [50, 90, 99]).tolist(), "max": int(lengths.max()),
       "longer_than_64": int((lengths > 64).sum())})
