"""What limits conll04 relations and wnut17 (issue #30 item 3): one fine-tune, then its errors read several ways.

Trains with the trainer's own entrypoint (``train_encoder``, LoRA 1e-3 as the API sends from 300 rows,
epochs from size, ``validation_split`` 0.1, early stopping patience 3, seed 42) on the same rows as
``npm run bench:quality`` (its mulberry32 shuffles: seed 13 for train, 17 for test), then scores the
test rows with Sift's Python scorer and breaks the misses down:

* ``exact``: the scorer's micro P/R/F1 at thresholds 0.3 / 0.5 / 0.7;
* ``overlap``: a prediction counts when its spans overlap the gold spans' text (relations: both arguments,
  as substrings either way) with the same type: how much is span boundaries;
* ``untyped``: exact spans, type ignored: how much is the type (relation kind / entity label);
* relations only: ``fp_absent_type`` = predicted relations whose kind the row has no gold of (what a
  missing negative teaches), and ``args_exact`` = gold relations whose head and tail are both predicted
  as exact arguments of some relation.

  SIFT_TORCH_THREADS=1 ~/.cache/sift/venv/bin/python bench/research/span_probe.py --set conll04-relations \
      --rows 300 [--entities] [--extra '{"sampling": {"remove_relations_prob": 0}}']
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))
DATA = Path(os.environ.get("SIFT_SHARED_DATA") or REPO.parent / "shared" / "data")
SETS = {
    "conll04-relations": ("conll04", ["relations"]),
    "wnut17": ("wnut17", ["entities"]),
    "conll04-entities": ("conll04", ["entities"]),
}


def mulberry_shuffled(xs: list, seed: int) -> list:
    """bench/parity/quality.ts's seeded shuffle, bit for bit (so the rows are the bench's)."""
    a, out = seed & 0xFFFFFFFF, list(xs)

    def imul(x: int, y: int) -> int:
        return (x * y) & 0xFFFFFFFF

    def rand() -> float:
        nonlocal a
        a = (a + 0x6D2B79F5) & 0xFFFFFFFF
        t = a
        t = imul(t ^ (t >> 15), t | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    for i in range(len(out) - 1, 0, -1):
        j = int(rand() * (i + 1))
        out[i], out[j] = out[j], out[i]
    return out


def read(set_name: str, split: str, keep: list[str]) -> list[dict]:
    rows = [
        json.loads(line)
        for line in (DATA / SETS[set_name][0] / f"{split}.jsonl")
        .read_text()
        .splitlines()
        if line
    ]
    rows = [{"text": r["text"], **{k: r[k] for k in keep if k in r}} for r in rows]
    return [r for r in rows if any(k in r for k in keep)]


def _overlaps(a: str, b: str) -> bool:
    return bool(a) and bool(b) and (a in b or b in a)


def breakdown(rows: list[dict], results: list[dict], relations: bool) -> dict:
    from sift_trainer.data.metrics import _norm, _pred_relations
    from sift_trainer.data.rows import _norm_entities, _norm_relations

    c = {
        "overlap_tp": 0,
        "untyped_tp": 0,
        "pred": 0,
        "gold": 0,
        "fp_absent_type": 0,
        "args_exact": 0,
    }
    for row, res in zip(rows, results):
        if relations:
            gold = {
                (r, _norm(h), _norm(t))
                for r, h, t in _norm_relations(row.get("relations"))
            }
            pred = _pred_relations(res or {})
            kinds = {g[0] for g in gold}
            c["fp_absent_type"] += sum(1 for p in pred if p[0] not in kinds)
            args = {(h, t) for _, h, t in pred}
            c["args_exact"] += sum(1 for _, h, t in gold if (h, t) in args)
            c["untyped_tp"] += len({(h, t) for _, h, t in gold} & args)
            left = list(pred)
            for r, h, t in gold:
                hit = next(
                    (
                        p
                        for p in left
                        if p[0] == r and _overlaps(p[1], h) and _overlaps(p[2], t)
                    ),
                    None,
                )
                if hit:
                    left.remove(hit)
                    c["overlap_tp"] += 1
        else:
            gold = {
                (lab, _norm(m)) for m, lab, _, _ in _norm_entities(row.get("entities"))
            }
            pred = {
                (lab, _norm(e.get("text") or ""))
                for lab, es in ((res or {}).get("entities") or {}).items()
                for e in es or []
                if isinstance(e, dict)
            }
            c["untyped_tp"] += len({m for _, m in gold} & {m for _, m in pred})
            left = list(pred)
            for lab, m in gold:
                hit = next(
                    (p for p in left if p[0] == lab and _overlaps(p[1], m)), None
                )
                if hit:
                    left.remove(hit)
                    c["overlap_tp"] += 1
        c["pred"] += len(pred)
        c["gold"] += len(gold)

    def f1(tp: int) -> float:
        p, r = tp / max(c["pred"], 1), tp / max(c["gold"], 1)
        return round(2 * p * r / (p + r), 3) if p + r else 0.0

    return {**c, "overlap_f1": f1(c["overlap_tp"]), "untyped_f1": f1(c["untyped_tp"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="conll04-relations", choices=sorted(SETS))
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--test-rows", type=int, default=300)
    ap.add_argument(
        "--entities",
        action="store_true",
        help="train on the rows' entities too (conll04 has both)",
    )
    ap.add_argument(
        "--extra", default="{}", help="hyperparameters (JSON) over the API's defaults"
    )
    a = ap.parse_args()

    from sift_trainer.data.metrics import predict, score_predictions
    from sift_trainer.encoder.training import train_encoder
    from sift_trainer.job.hyperparameters import Hyperparameters
    from sift_trainer.job.paths import JobPaths

    keep = SETS[a.set][1] + (
        ["entities"] if a.entities and "entities" not in SETS[a.set][1] else []
    )
    train = mulberry_shuffled(read(a.set, "train", keep), 13)[: a.rows]
    test = mulberry_shuffled(read(a.set, "test", SETS[a.set][1]), 17)[: a.test_rows]
    base = str(Path.home() / ".cache" / "sift" / "models" / "sift--gliner2-mini-v1")
    hp = Hyperparameters.from_dict(
        {
            "base_model_path": base,
            "training_type": "lora",
            "seed": 42,
            "learning_rate": 1e-3 if a.rows >= 300 else 3e-4,
            "validation_split": 0.1,
            "early_stopping_patience": 3,
            **json.loads(a.extra),
        }
    )
    t0 = time.time()
    res = train_encoder(
        hp,
        JobPaths.from_env(
            {"SIFT_JOB_DIR": tempfile.mkdtemp(prefix="sift-span-probe-")}
        ),
        train,
        None,
    )
    wall = round(time.time() - t0)
    model, info = res["model"], res["info"]
    if (
        a.entities and a.set == "conll04-relations"
    ):  # score the relation head alone, as the bench does
        info.heads, info.entity_labels = [h for h in info.heads if h != "entities"], []
    out = {
        "set": a.set,
        "rows": a.rows,
        "entities_too": a.entities,
        "extra": json.loads(a.extra),
        "steps": res["steps"],
        "epochs": res["epochs"],
        "validation_f1": res["metrics"].get("f1"),
        "wall_s": wall,
    }
    for th in (0.3, 0.5, 0.7):
        preds = predict(model, test, info, threshold=th)
        m = score_predictions(test, preds, info)
        out[f"exact@{th}"] = {k: round(m[k], 3) for k in ("f1", "precision", "recall")}
        if th == 0.5:
            out["breakdown@0.5"] = breakdown(test, preds, a.set == "conll04-relations")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
