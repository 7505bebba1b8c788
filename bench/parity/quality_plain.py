"""The reference side of bench/parity/quality.ts: the plain ``gliner2`` trainer with its own defaults.

Reads a spec (base model, train rows, test rows in Sift's row format), fine-tunes
``GLiNER2.from_pretrained(base)`` with ``GLiNER2Trainer`` and a ``TrainingConfig`` that sets only what
the library needs to run here (output dir, CPU: no fp16/bf16/workers, no evaluation or best-model
saving, the seed), so epochs, batch size, learning rates and warm-up are the library's defaults. The
rows become library records with Sift's own converter (the records Sift's trainer feeds the same
library), and the model is scored with Sift's Python scorer (containers/training/sift_trainer/data/metrics.py:
exact spans, micro F1). Prints one JSON line: {"f1", "wall_s", "train_rows", "epochs", "steps"}.

  ~/.cache/sift/venv/bin/python bench/parity/quality_plain.py SPEC.json
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))


def main(spec_path: str) -> None:
    import torch
    from gliner2 import GLiNER2
    from gliner2.training.trainer import GLiNER2Trainer, TrainingConfig

    from sift_trainer.data.rows import convert, infer_tasks
    from sift_trainer.data.metrics import evaluate

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(int(spec.get("threads", 1)))
    train, test = spec["train"], spec["test"]
    info = infer_tasks(train + test)
    t0 = time.monotonic()
    model = GLiNER2.from_pretrained(spec["base"], map_location="cpu")
    with tempfile.TemporaryDirectory(prefix="sift-bench-plain-") as out:
        cfg = TrainingConfig(output_dir=out, eval_strategy="no", save_best=False, fp16=False, bf16=False,
                             num_workers=0, pin_memory=False, seed=int(spec.get("seed", 42)))
        summary = GLiNER2Trainer(model=model, config=cfg).train(train_data=convert(train, info))
    wall = time.monotonic() - t0
    model.eval()
    metrics = evaluate(model, test, info)
    print(json.dumps({"f1": metrics.get("f1"), "wall_s": round(wall, 1), "train_rows": len(train),
                      "epochs": cfg.num_epochs, "batch_size": cfg.batch_size, "steps": summary.get("total_steps")}))


if __name__ == "__main__":
    main(sys.argv[1])
