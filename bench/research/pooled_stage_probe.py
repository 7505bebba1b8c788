"""Variants of the pooled classifier's tuning stage on banking77 at 1,000 rows (issue #30), scored on the whole
test split with the stage's own head (``pooled_cls.fit``): what the stage can reach on a given encoder.

Settings (comma-separated, run in order, each on a freshly loaded encoder):
  frozen                      the head on the encoder as it is
  supcon:E:LR:TAU             supervised contrastive tuning, E epochs of label-balanced batches (4 rows per label,
                              32 per batch), AdamW LR with linear decay, temperature TAU
  e2e:E:LR                    end-to-end cross-entropy, encoder + a linear head warm-started from the fitted one
  supcon:3:2e-5:0.1+e2e:3:3e-5  one after the other
Encoders: ``mini`` (sift/gliner2-mini-v1's, the served route's) or ``minilm`` (the untouched all-MiniLM-L6-v2 the
mini model is built from).

Run (repo root):  SIFT_TORCH_THREADS=1 ~/.cache/sift/venv/bin/python bench/research/pooled_stage_probe.py \
                    [--encoder mini|minilm] [--settings frozen,supcon:3:2e-5:0.1,e2e:4:3e-5] [--set banking77]
Results: docs/experiments/training.md "banking77 at 1,000 rows through the API, and the stage's ceiling".
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pk_batches(labels: list[str], per_label: int, batch: int, rng: random.Random) -> list[list[int]]:
    """Batches of up to ``per_label`` rows of a label each, labels shuffled: most rows meet a same-label row."""
    by: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        by.setdefault(lab, []).append(i)
    groups = []
    for idx in by.values():
        idx = idx[:]
        rng.shuffle(idx)
        groups += [idx[s : s + per_label] for s in range(0, len(idx), per_label)]
    rng.shuffle(groups)
    out, cur = [], []
    for g in groups:
        if cur and len(cur) + len(g) > batch:
            out.append(cur)
            cur = []
        cur += g
    return out + ([cur] if cur else [])


def supcon(encoder, tok, rows, epochs: int, lr: float, tau: float, seed: int) -> None:
    import torch

    from sift_trainer.encoder.pooled_cls import PooledHead, tokenize

    rng = random.Random(seed)
    torch.manual_seed(seed)
    texts, labs = [r["text"] for r in rows], [r["label"] for r in rows]
    plan = [b for _ in range(epochs) for b in pk_batches(labs, 4, 32, rng)]
    params = [p for p in encoder.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / len(plan)))
    encoder.eval()
    ids = {lab: k for k, lab in enumerate(sorted(set(labs)))}
    for idx in plan:
        b = tokenize(tok, [texts[i] for i in idx], 256)
        z = PooledHead.pool(encoder(**b).last_hidden_state.float(), b["attention_mask"])
        y = torch.tensor([ids[labs[i]] for i in idx])
        eye = torch.eye(len(idx), dtype=torch.bool)
        sim = (z @ z.T / tau).masked_fill(eye, -1e9)
        logp = sim - torch.logsumexp(sim, dim=1, keepdim=True)
        pos = (y[:, None] == y[None, :]) & ~eye
        has = pos.any(1)
        if not has.any():
            continue
        loss = -(logp.masked_fill(~pos, 0).sum(1)[has] / pos.sum(1)[has]).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()


def e2e(encoder, tok, rows, labels: list[str], epochs: int, lr: float, seed: int) -> None:
    import torch
    from torch import nn

    from sift_trainer.encoder import pooled_cls
    from sift_trainer.encoder.pooled_cls import PooledHead, tokenize

    rng = random.Random(seed)
    torch.manual_seed(seed)
    y = pooled_cls.targets(rows, labels, False)
    x = pooled_cls.pooled_embeddings(encoder, tok, [r["text"] for r in rows], 256)
    head = pooled_cls.fit_head(x, y, len(labels), False, seed).linear
    groups = [{"params": [p for p in encoder.parameters() if p.requires_grad], "lr": lr}, {"params": head.parameters(), "lr": 1e-3}]
    opt = torch.optim.AdamW(groups, weight_decay=0.0)
    order = list(range(len(rows)))
    steps = epochs * ((len(rows) + 31) // 32)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / steps))
    encoder.eval()
    for _ in range(epochs):
        rng.shuffle(order)
        for s in range(0, len(order), 32):
            idx = order[s : s + 32]
            b = tokenize(tok, [rows[i]["text"] for i in idx], 256)
            z = PooledHead.pool(encoder(**b).last_hidden_state.float(), b["attention_mask"])
            loss = nn.functional.cross_entropy(head(z), y[idx])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
            opt.step()
            sched.step()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="banking77")
    ap.add_argument("--encoder", default="mini", choices=("mini", "minilm"))
    ap.add_argument("--settings", default="frozen,supcon:3:2e-5:0.1")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    import torch
    from pooled_probe import load

    from sift_trainer.encoder import pooled_cls
    from sift_trainer.process import set_threads

    set_threads()
    train, test = load(a.set, 1000, 0, a.seed)
    labels = sorted({r["label"] for r in train} | {r["label"] for r in test})
    for setting in a.settings.split(","):
        if a.encoder == "mini":
            from sift_trainer.encoder.training import load_model

            model = load_model(Path.home() / ".cache/sift/models/sift--gliner2-mini-v1").eval()
            encoder, tok = model.encoder, model.processor.tokenizer
        else:
            from transformers import AutoModel, AutoTokenizer

            from sift_trainer.base_models import minilm_dir

            encoder, tok = AutoModel.from_pretrained(str(minilm_dir())).eval(), AutoTokenizer.from_pretrained(str(minilm_dir()))
        c0 = time.process_time()
        for step in setting.split("+"):
            kind, *p = step.split(":")
            if kind == "supcon":
                supcon(encoder, tok, train, int(p[0]), float(p[1]), float(p[2]), a.seed)
            elif kind == "e2e":
                e2e(encoder, tok, train, labels, int(p[0]), float(p[1]), a.seed)
            elif kind != "frozen":
                raise SystemExit(f"unknown setting {step!r}")
        c1 = time.process_time()
        x = pooled_cls.pooled_embeddings(encoder, tok, [r["text"] for r in train], 256)
        head = pooled_cls.fit_head(x, pooled_cls.targets(train, labels, False), len(labels), False, a.seed)
        xt = pooled_cls.pooled_embeddings(encoder, tok, [r["text"] for r in test], 256)
        with torch.no_grad():
            acc = float((head.linear(xt).argmax(-1) == pooled_cls.targets(test, labels, False)).float().mean())
        print(json.dumps({"set": a.set, "encoder": a.encoder, "setting": setting, "accuracy": round(acc, 4), "tuning_cpu_s": round(c1 - c0, 1)}), flush=True)


if __name__ == "__main__":
    main()
