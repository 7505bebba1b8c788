"""Side-by-side fine-tuning benchmark: Sift's trainer entrypoint vs the plain gliner2 library trainer.

For each dataset (wnut17 = NER, banking77 = single-label classification) the same seeded subsample of the
train split is fine-tuned from the offline mini model in two ways:

  sift   ``python -m sift_trainer.job`` in containers/training, driven by a temporary SIFT_JOB_DIR
         (hyperparameters.json + input/data/train/rows.jsonl), exactly like a production job.
  plain  ``gliner2.GLiNER2.from_pretrained`` + ``gliner2.training.trainer.GLiNER2Trainer`` with a
         ``TrainingConfig`` carrying the same hyperparameters (epochs, encoder lr, seed, batch size),
         trained on the same rows Sift trains on (Sift holds out ``validation_split`` first).

Each training run is a child process, so wall time and peak RSS (os.wait4 rusage of that child) are per run.
Both resulting models are then scored here on the same test subsample with Sift's scorer
(containers/training/sift_trainer/data/metrics.py: exact label+start+end span micro P/R/F1 for NER, micro F1 =
accuracy for single-label classification).

Run (repo root):  HF_HUB_OFFLINE=1 ~/.cache/sift/venv/bin/python bench/parity/training.py [--train-rows N ...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[2]
TRAINING_DIR = REPO / "containers" / "training"
DATA_DIR = Path("/work/shared/data")
DEFAULT_BASE = Path.home() / ".cache" / "sift" / "models" / "sift--gliner2-mini-v1"
DATASETS = {"wnut17": "ner", "banking77": "classification"}

sys.path.insert(0, str(TRAINING_DIR))  # sift_trainer.data.rows / .metrics for the shared record format + scorer


def read_rows(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def top_labels(rows: List[Dict[str, Any]], k: int) -> set:
    """The k most frequent single-label classes (ties broken by name, so the choice is deterministic)."""
    counts: Dict[str, int] = {}
    for r in rows:
        counts[r["label"]] = counts.get(r["label"], 0) + 1
    return set(sorted(counts, key=lambda lab: (-counts[lab], lab))[:k])


def load_rows(path: Path, n: int, seed: int, keep_labels=None) -> List[Dict[str, Any]]:
    """Seeded random subsample (files such as banking77 are sorted by label, so never take the head)."""
    rows = read_rows(path)
    if keep_labels is not None:
        rows = [r for r in rows if r.get("label") in keep_labels]
    random.Random(seed).shuffle(rows)
    return rows[:n] if n > 0 else rows


def hyperparameters(args, base: Path) -> Dict[str, Any]:
    return {"base_model_path": str(base), "training_type": "full", "nr_epochs": args.epochs,
            "learning_rate": args.lr, "seed": args.seed, "validation_split": args.validation_split}


def run_child(cmd: List[str], cwd: Path, env: Dict[str, str], log_path: Path) -> Dict[str, Any]:
    """Run one training child; return wall seconds, its own peak RSS (MB) and exit code."""
    with open(log_path, "w") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(proc.pid, 0)  # rusage of this child only (ru_maxrss in KiB on Linux)
        wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"wall_s": wall, "peak_rss_mb": ru.ru_maxrss / 1024.0, "rc": proc.returncode}


# --------------------------------------------------------------------------------------------- sift path
def train_sift(args, base: Path, rows: List[Dict[str, Any]], work: Path, env: Dict[str, str]) -> Dict[str, Any]:
    job = work / "sift_job"
    (job / "input" / "config").mkdir(parents=True)
    (job / "input" / "data" / "train").mkdir(parents=True)
    (job / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hyperparameters(args, base)))
    with open(job / "input" / "data" / "train" / "rows.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    res = run_child([sys.executable, "-m", "sift_trainer.job"], TRAINING_DIR,
                    dict(env, SIFT_JOB_DIR=str(job)), work / "sift.log")
    # the child's stdout is one JSON event per line; pick out the dataset split it actually trained on
    for line in (work / "sift.log").read_text().splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict) and ev.get("event") == "dataset":
            res["train_rows"] = ev.get("train_rows")
    res["model_dir"] = job / "model"
    return res


# -------------------------------------------------------------------------------------------- plain path
def plain_worker(spec_path: str) -> None:
    """Child process: plain gliner2 fine-tuning, the way the library documents it."""
    import torch
    from gliner2 import GLiNER2
    from gliner2.training.trainer import GLiNER2Trainer, TrainingConfig

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    model = GLiNER2.from_pretrained(spec["base"])
    cfg = TrainingConfig(output_dir=spec["out"] + "/ckpt", num_epochs=spec["epochs"], batch_size=spec["batch_size"],
                         encoder_lr=spec["lr"], seed=spec["seed"], eval_strategy="no", save_best=False,
                         fp16=False, bf16=False, num_workers=0)
    GLiNER2Trainer(model=model, config=cfg).train(train_data=spec["records"])
    model.save_pretrained(spec["out"] + "/model")


def to_gliner2_records(rows: List[Dict[str, Any]], info) -> List[Dict[str, Any]]:
    """Library record format {"input", "output"}; every label of the dataset is listed (absent = negative)."""
    from sift_trainer.data.rows import CLASSIFICATION_TASK

    recs = []
    for r in rows:
        out: Dict[str, Any] = {}
        if "entities" in info.heads:
            ents = {lab: [] for lab in info.entity_labels}
            for e in r.get("entities") or []:
                if e["text"] not in ents[e["label"]]:
                    ents[e["label"]].append(e["text"])
            out["entities"] = ents
        if "classification" in info.heads:  # same task name as Sift so one schema scores both models
            out["classifications"] = [{"task": CLASSIFICATION_TASK, "labels": list(info.class_labels),
                                       "true_label": [r["label"]]}]
        recs.append({"input": r["text"], "output": out})
    return recs


def train_plain(args, base: Path, rows: List[Dict[str, Any]], info, work: Path, env: Dict[str, str]) -> Dict[str, Any]:
    from sift_trainer.data.rows import split

    # same rows Sift trains on: Sift's own deterministic split drops the validation part first
    train_rows, _ = split(rows, args.validation_split, args.seed)
    spec = {"base": str(base), "out": str(work / "plain"), "epochs": args.epochs, "lr": args.lr, "seed": args.seed,
            "batch_size": args.batch_size, "threads": args.threads, "records": to_gliner2_records(train_rows, info)}
    spec_path = work / "plain_spec.json"
    spec_path.write_text(json.dumps(spec, ensure_ascii=False))
    res = run_child([sys.executable, str(Path(__file__).resolve()), "--plain-worker", str(spec_path)],
                    REPO, env, work / "plain.log")
    res["train_rows"] = len(train_rows)
    res["model_dir"] = work / "plain" / "model"
    return res


# ------------------------------------------------------------------------------------------------ main
def score(model_dir: Path, test_rows, info) -> float:
    from gliner2 import GLiNER2
    from sift_trainer.data.metrics import evaluate

    model = GLiNER2.from_pretrained(str(model_dir))
    model.eval()
    return float(evaluate(model, test_rows, info)["f1"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--train-rows", type=int, default=800, help="train rows sampled per dataset (0 = all)")
    ap.add_argument("--test-rows", type=int, default=300, help="test rows sampled per dataset (0 = all)")
    ap.add_argument("--max-classes", type=int, default=0,
                    help="classification: keep only the N most frequent labels (0 = all). With all 77 banking77 "
                         "labels gliner2's label-renaming augmentation pushes prompts past MiniLM's 512 positions: "
                         "the plain trainer crashes ('expanded size of the tensor (7xx) must match ... (512)'); "
                         "Sift's trainer samples negative labels to fit (sift_trainer/encoder/prompt_budget.py)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-5, help="encoder learning rate (Sift's full default)")
    ap.add_argument("--batch-size", type=int, default=8, help="plain path; Sift's default batch size is 8")
    ap.add_argument("--validation-split", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int, default=2, help="torch threads in both children")
    ap.add_argument("--base-model", type=Path, default=DEFAULT_BASE)
    ap.add_argument("--plain-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plain_worker:
        return plain_worker(args.plain_worker)

    import torch
    from sift_trainer.data.rows import infer_tasks

    torch.set_num_threads(args.threads)
    env = dict(os.environ, HF_HUB_OFFLINE="1", SIFT_TORCH_THREADS=str(args.threads))
    base = args.base_model.expanduser()
    table = []
    with tempfile.TemporaryDirectory(prefix="sift-bench-training-") as tmp:
        for name in args.datasets:
            keep = None
            if DATASETS[name] == "classification" and args.max_classes > 0:
                keep = top_labels(read_rows(DATA_DIR / name / "train.jsonl"), args.max_classes)
            train = load_rows(DATA_DIR / name / "train.jsonl", args.train_rows, args.seed, keep)
            test = load_rows(DATA_DIR / name / "test.jsonl", args.test_rows, args.seed, keep)
            info = infer_tasks(train + test)  # label inventory for schema + scorer, shared by both paths
            print(f"[{name}] {DATASETS[name]}: {len(train)} train rows sampled, {len(test)} test rows, "
                  f"{args.epochs} epoch(s), labels={len(info.entity_labels or info.class_labels)}", flush=True)
            for path in ("sift", "plain"):
                work = Path(tmp) / name / path
                work.mkdir(parents=True)
                if path == "sift":
                    res = train_sift(args, base, train, work, env)
                else:
                    res = train_plain(args, base, train, info, work, env)
                if res["rc"] != 0:
                    print(f"[{name}/{path}] training failed (rc {res['rc']}); log tail:\n"
                          + "\n".join((work / f'{path}.log').read_text().splitlines()[-20:]), flush=True)
                    f1 = float("nan")
                else:
                    t0 = time.monotonic()
                    f1 = score(res["model_dir"], test, info)
                    print(f"[{name}/{path}] trained {res['wall_s']:.0f}s, scored in {time.monotonic() - t0:.0f}s, "
                          f"F1 {f1:.4f}", flush=True)
                table.append((name, path, res.get("train_rows"), args.epochs, res["wall_s"], res["peak_rss_mb"], f1))

    print()
    print(f"{'dataset':<10} {'path':<6} {'train rows':>10} {'epochs':>6} {'wall s':>8} {'peak RSS MB':>11} {'test F1':>8}")
    for d, p, n, e, w, rss, f1 in table:
        print(f"{d:<10} {p:<6} {n!s:>10} {e:>6} {w:>8.1f} {rss:>11.0f} {f1:>8.4f}")
    print(f"(test rows per dataset: {args.test_rows}; wall = whole child process: model load, training, save; "
          f"the sift child also runs its validation eval and ONNX export)")


if __name__ == "__main__":
    main()
