"""Zero-shot quality of a base model on the public held-out sets (issue #13 item 3: "measure zero-shot
F1 on the shared datasets before and after").

Loads a GLiNER2 checkpoint directory (the built ``sift/gliner2-mini-v1`` by default), predicts the
test split of each set with the set's own label names and no training, and scores it with Sift's
Python scorer (``sift_trainer.data.metrics``: exact spans, micro F1) — the scorer the trainer and
``bench/parity/quality_plain.py`` use. Sets: ``wnut17`` and ``conll04`` entities, ``conll04-relations``.

  ~/.cache/sift/venv/bin/python bench/research/zero_shot.py [--model DIR] [--rows N] [--sets wnut17,conll04]

Prints one JSON line per set: {"set", "rows", "f1", "precision", "recall", "seconds"}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))

SETS = {
    # name -> (directory under the shared data, columns kept)
    "wnut17": ("wnut17", ("text", "entities")),
    "conll04": ("conll04", ("text", "entities")),
    "conll04-relations": ("conll04", ("text", "entities", "relations")),
}


def shared_data() -> Path:
    return Path(os.environ.get("SIFT_SHARED_DATA", REPO.parent / "shared" / "data"))


def load_rows(name: str, limit: int) -> list:
    folder, keep = SETS[name]
    rows = []
    with open(shared_data() / folder / "test.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            rows.append({k: row[k] for k in keep if k in row})
            if limit and len(rows) >= limit:
                break
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_model = Path.home() / ".cache" / "sift" / "models" / "sift--gliner2-mini-v1"
    parser.add_argument("--model", default=str(default_model))
    parser.add_argument("--rows", type=int, default=0, help="first N test rows of each set (0: all)")
    parser.add_argument("--sets", default="wnut17,conll04,conll04-relations")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--threshold", type=float, default=0.5, help="span score threshold (the serving default: 0.5)")
    args = parser.parse_args()

    import torch
    from gliner2 import GLiNER2

    from sift_trainer.data.metrics import evaluate
    from sift_trainer.data.rows import infer_tasks

    torch.set_num_threads(args.threads)
    model = GLiNER2.from_pretrained(args.model, map_location="cpu")
    model.eval()
    for name in args.sets.split(","):
        rows = load_rows(name, args.rows)
        t0 = time.monotonic()
        metrics = evaluate(model, rows, infer_tasks(rows), threshold=args.threshold)
        print(json.dumps({"set": name, "rows": len(rows), "f1": round(float(metrics.get("f1", 0.0)), 4),
                          "precision": round(float(metrics.get("precision", 0.0)), 4),
                          "recall": round(float(metrics.get("recall", 0.0)), 4),
                          "seconds": round(time.monotonic() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
