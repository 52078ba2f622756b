"""The device run's summary reads every number from the logs that came back (bench/device/summarise.py)."""
from __future__ import annotations

import io
import json
import tarfile


def test_numbers_come_from_the_logs(tmp_path):
    from bench.device.summarise import main

    (tmp_path / "env.txt").write_text("cuda True NVIDIA H200\n")
    (tmp_path / "dual-encoder.log").write_text(
        "train dual-encoder: 5%\r step 25/20000 dev Recall@100 0.7847 (best 0.7861)\n"
        "train rc=0 seconds=114\n"
        "dual-encoder on qqp-bimpm [test: 1,781 queries; query form: tokenized]\n"
        "recall@100            0.7399        0.7399\nH@1                   0.4514        0.4514\neval rc=0\n")
    metrics = {"profile": "paper", "steps": 250, "train_seconds": 19.6,
               "training": {"best_step": 0, "curve": [{"step": 0, "dev": 0.78612}, {"step": 25, "dev": 0.7847}]}}
    with tarfile.open(tmp_path / "dual-encoder-artifacts.tgz", "w:gz") as tar:
        data = json.dumps(metrics).encode()
        info = tarfile.TarInfo("systems/qqp-bimpm/dual-encoder/metrics.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (tmp_path / "dual-encoder-after-warmup.log").write_text(
        '{"system": "dual-encoder", "patience": 90, "warmup_steps": 2000}\n'
        "   86.1s dual-encoder: step 0/20000 dev Recall@100 0.7861 (best 0.7861)\n"
        "  227.4s dual-encoder: step 1450/20000 dev Recall@100 0.9808 (best 0.9808)\n"
        "  407.2s dual-encoder: step 3450/20000 dev Recall@100 0.9624 (best 0.9808)\nrc=124\n")
    out = tmp_path / "report.json"
    assert main([str(tmp_path), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    job = report["paper_profile"]["dual-encoder"]
    assert job["test"] == {"recall@100": 0.7399, "H@1": 0.4514} and job["test_queries"] == 1781
    assert job["train_wall_seconds"] == 114 and job["best_step"] == 0 and job["curve"] == [[0, 0.7861], [25, 0.7847]]
    warm = report["patience_after_warmup"]["dual-encoder"]
    assert warm["best"] == {"step": 1450, "dev": 0.9808} and warm["untrained_dev"] == 0.7861
    assert warm["ended"] == "cut by the device's time limit" and warm["last"]["step"] == 3450
