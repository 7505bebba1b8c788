"""The trainer's pooled-classifier stage (containers/training/sift_trainer/encoder/pooled_cls.py) on banking77 and
snips at 1,000 training rows: frozen encoder vs the SetFit-style contrastive stage, scored on each set's test split.

Runs exactly what a job runs after its GLiNER2 training (contrastive_tune, then fit on the tuned encoder), on the
base mini model; a "lora" setting puts LoRA adapters on the encoder the way a LoRA job's trainer does (gliner2's
"encoder" targets, r=16, alpha=32) and tunes those only. The issue's bar: banking77 >= 0.85, snips >= 0.95.

Run (repo root):  SIFT_TORCH_THREADS=1 ~/.cache/sift/venv/bin/python bench/research/pooled_probe.py \
                    [--sets banking77,snips --rows 1000 --test-rows 0 --settings frozen,full:1,full:2,lora:2]
("full:1@5e-5": one pair iteration per row at rate 5e-5)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))
DATA = Path(os.environ.get("SIFT_SHARED_DATA", "/work/shared/data"))


def load(name: str, rows: int, test_rows: int, seed: int):
    def read(f: str) -> list[dict]:
        return [json.loads(line) for line in (DATA / name / f).read_text().splitlines()]

    train = read("train.jsonl")
    random.Random(seed).shuffle(train)
    test = read("test.jsonl")
    if (
        0 < test_rows < len(test)
    ):  # a seeded sample of the test split: the shared machine's time
        test = random.Random(seed).sample(test, test_rows)
    return [{"text": r["text"], "label": r["label"]} for r in train[:rows]], test


def with_lora(model, r: int = 16, alpha: float = 32.0):
    from gliner2.training.lora_targets import _resolve_targets
    from peft import LoraConfig, get_peft_model

    for p in model.parameters():
        p.requires_grad = False
    cfg = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=0.0,
        target_modules=_resolve_targets(model, ["encoder"]),
    )
    return get_peft_model(model, cfg)


def run(base: str, setting: str, train, test, seed: int) -> dict:
    import torch
    from sift_trainer.encoder import pooled_cls
    from sift_trainer.encoder.training import load_model

    torch.manual_seed(seed)
    kind, _, it = setting.partition(":")
    lr = None
    if "@" in it:
        it, lr = it.split("@")
    model = load_model(Path(base)).eval()
    labels = sorted({r["label"] for r in train} | {r["label"] for r in test})
    t0, c0 = time.time(), time.process_time()
    stats: dict = {}
    if kind != "frozen":
        tuned = with_lora(model) if kind == "lora" else model
        inner = tuned.get_base_model() if kind == "lora" else tuned
        params = [p for p in inner.encoder.parameters() if p.requires_grad]
        stats = pooled_cls.contrastive_tune(
            inner.encoder,
            inner.processor.tokenizer,
            train,
            False,
            pooled_cls.max_tokens_for(inner),
            iterations=int(it),
            lr=float(
                lr or pooled_cls.CONTRASTIVE_LR["lora" if kind == "lora" else "full"]
            ),
            seed=seed,
            params=params,
        )
        model = tuned.merge_and_unload() if kind == "lora" else tuned
    t1, c1 = time.time(), time.process_time()
    pc = pooled_cls.fit(model, train, test, labels, False, seed)
    return {
        "setting": setting,
        "accuracy": pc.route_metrics["pooled"]["accuracy"],
        "test_rows": len(test),
        "contrastive_s": round(t1 - t0, 1),
        "contrastive_cpu_s": round(
            c1 - c0, 1
        ),  # CPU seconds: the wall time on a shared machine varies with its load
        "fit_and_score_s": round(time.time() - t1, 1),
        **{k: stats[k] for k in ("pairs", "steps", "mean_loss") if k in stats},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="banking77,snips")
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument(
        "--test-rows",
        type=int,
        default=0,
        help="score a seeded sample of the test split (0 = all)",
    )
    ap.add_argument("--settings", default="frozen,full:1,full:2,lora:2")
    ap.add_argument(
        "--base", default=str(Path.home() / ".cache/sift/models/sift--gliner2-mini-v1")
    )
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from sift_trainer.process import set_threads

    set_threads()
    for name in a.sets.split(","):
        train, test = load(name, a.rows, a.test_rows, a.seed)
        for setting in a.settings.split(","):
            print(
                json.dumps(
                    {
                        "set": name,
                        "train_rows": len(train),
                        **run(a.base, setting, train, test, a.seed),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
