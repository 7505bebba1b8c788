"""Held-out accuracy per epoch of a single-label classification job on a banking77 label subset.

The job runs through ``sift_trainer.encoder.training.train_encoder`` (the production trainer, platform defaults
unless ``--extra`` overrides them) on N labels x K training rows; 8 test rows per label are held out.
Validation accuracy per epoch is printed from the job's own ``metrics`` events (docs/experiments/training.md
"Classification with many labels").

Run (repo root):  SIFT_TORCH_THREADS=1 ~/.cache/sift/venv/bin/python bench/research/cls_curve.py --labels 20 --rows 15
Before/after the head warm-up:  add  --extra '{"head_warmup_steps": 0, "encoder_dropout": true}'
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))
DATA = Path(os.environ.get("SIFT_SHARED_DATA", REPO.parent / "shared" / "data")) / "banking77"


def banking_subset(n_labels: int, rows: int, held_out: int, seed: int = 0):
    """(train, test) rows of ``n_labels`` seeded-random banking77 intents: ``rows`` training and ``held_out``
    test rows per intent (the test rows from the set's own test split)."""
    read = lambda f: [json.loads(line) for line in open(DATA / f)]  # noqa: E731
    train_all, test_all = read("train.jsonl"), read("test.jsonl")
    rng = random.Random(seed)
    labels = sorted({r["label"] for r in train_all})
    rng.shuffle(labels)
    labels = labels[:n_labels]
    train = [r for lab in labels for r in rng.sample([r for r in train_all if r["label"] == lab], rows)]
    test = [r for lab in labels for r in rng.sample([r for r in test_all if r["label"] == lab], held_out)]
    rng.shuffle(train)
    return train, test


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--labels", type=int, default=20)
    ap.add_argument("--rows", type=int, default=15, help="training rows per label")
    ap.add_argument("--held-out", type=int, default=8, help="test rows per label")
    ap.add_argument("--base", default=str(Path.home() / ".cache/sift/models/sift--gliner2-mini-v1"))
    ap.add_argument("--extra", default="{}", help="hyperparameters (JSON) on top of the defaults")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    from sift_trainer import events
    from sift_trainer.encoder.training import train_encoder
    from sift_trainer.job.hyperparameters import Hyperparameters
    from sift_trainer.job.paths import JobPaths

    train, val = banking_subset(a.labels, a.rows, a.held_out, a.seed)

    curve = []
    emit = events.emit

    def record(event, **fields):  # the job's own events, as a user would read them in its logs
        if event == "metrics" and fields.get("scope") in ("baseline", "validation"):
            curve.append((fields["scope"], fields.get("epoch", 0), fields["metrics"].get("f1")))
        if event == "head_warmup":
            print("head_warmup", json.dumps(fields), flush=True)
        emit(event, **fields)

    events.emit = record
    import sift_trainer.encoder.training as enc

    enc.emit = record
    hp = Hyperparameters.from_dict({"base_model_path": a.base, "training_type": "full", "seed": 3, **json.loads(a.extra)})
    t0 = time.time()
    res = train_encoder(hp, JobPaths.from_env({"SIFT_JOB_DIR": tempfile.mkdtemp()}), train, val)
    print(json.dumps({"labels": a.labels, "train_rows": len(train), "held_out": len(val), "steps": res["steps"],
                      "seconds": round(time.time() - t0), "accuracy_per_epoch": curve,
                      "final": res["metrics"]["f1"], "warnings": res["metrics"]["warnings"]}))


if __name__ == "__main__":
    main()
