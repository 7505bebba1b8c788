"""Single-label classification jobs: give the ``[L]``-token head a text signal before fine-tuning.

Why (docs/experiments/training.md "Classification with many labels"): the classifier scores each ``[L]`` token's
encoder output alone, so it can only rank labels by text if those outputs carry the text. In the mini
model they barely do — ``[L]`` tokens put 1-10% of their attention on the text, and across texts an
``[L]`` output moves by ~0.26 (norm ~2.5) — while the encoder's training-mode dropout moves it by
~1.15. Fine-tuning from a fresh head therefore trains on noise 4x the signal and stays at chance.

Two changes that leave the model's weights format, export and inference untouched:

* :func:`quiet_encoder_dropout` — no dropout in the encoder while training (eval mode has none anyway);
* :func:`fit_head` — a linear-probe warm-up ("LP-FT", Kumar et al. 2022): the head alone is fitted on
  the frozen encoder's ``[L]`` outputs (cheap: the encoder runs forward only, a few label orders per
  row), so fine-tuning starts from a head that already points at the text-dependent direction and the
  encoder's gradient is coherent from the first step.
"""

from __future__ import annotations

import copy
import random
import time
from typing import Any

#: head-only optimizer steps (batches of 8 prompts) and their rate
DEFAULT_HEAD_WARMUP_STEPS = 1000
HEAD_WARMUP_LR = 3e-3
#: label orders drawn per training row (more rows: fewer orders; at least one)
MAX_LABEL_ORDERS = 3
MAX_WARMUP_PROMPTS = 3000


def quiet_encoder_dropout(model) -> int:
    """Set every dropout inside ``model.encoder`` to 0 (the config is untouched); returns how many."""
    import torch

    n = 0
    for m in model.encoder.modules():
        if isinstance(m, torch.nn.Dropout) and m.p > 0:
            m.p = 0.0
            n += 1
    return n


def _gold_index(task: dict[str, Any]) -> int | None:
    gold = task.get("true_label")
    gold = gold[0] if isinstance(gold, list) and len(gold) == 1 else gold
    return task["labels"].index(gold) if isinstance(gold, str) and gold in task["labels"] else None


def _prompts(records: list[dict[str, Any]], rng: random.Random, orders: int, prepare) -> list[dict[str, Any]]:
    out = []
    for _ in range(orders):
        for rec in records:
            r = {"input": rec["input"], "output": copy.deepcopy(rec["output"])}
            rng.shuffle(r["output"]["classifications"][0]["labels"])
            out.append(prepare(r, rng))
    return out


def _features(model, prompts: list[dict[str, Any]], chunk: int = 16):
    """(X: prompts x max_labels x hidden, mask, gold index per prompt) from the frozen encoder, eval mode."""
    import torch

    feats, golds = [], []
    device = next(model.parameters()).device  # gliner2's _encode_batch leaves the batch where the collator made it
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for i in range(0, len(prompts), chunk):
                part = prompts[i : i + chunk]
                batch = model.processor.collate_fn_inference([(p["input"], p["output"]) for p in part]).to(device)
                _tokens, schema = model._encode_batch(batch)
                for j, p in enumerate(part):
                    gold = _gold_index(p["output"]["classifications"][0])
                    if gold is None or not schema[j] or not schema[j][0]:
                        continue
                    feats.append(torch.stack(schema[j][0])[1:])  # [1:]: skip the [P] token, as the loss does
                    golds.append(gold)
    finally:
        model.train(was_training)
    if not feats:
        return None
    n_max = max(f.shape[0] for f in feats)
    X = torch.zeros(len(feats), n_max, feats[0].shape[-1], device=device)
    mask = torch.zeros(len(feats), n_max, dtype=torch.bool, device=device)
    for k, f in enumerate(feats):
        X[k, : f.shape[0]] = f
        mask[k, : f.shape[0]] = True
    return X, mask, torch.tensor(golds, device=device)


def fit_head(
    model,
    records: list[dict[str, Any]],
    prepare,
    *,
    steps: int = DEFAULT_HEAD_WARMUP_STEPS,
    lr: float = HEAD_WARMUP_LR,
    seed: int = 0,
    batch_size: int = 8,
) -> dict[str, Any]:
    """Fit ``model.classifier`` alone (softmax cross-entropy over each prompt's labels) on frozen features.

    ``records``: single-label classification training records; ``prepare(record, rng)`` turns one into
    the prompt the trainer would build (negatives capped, fitted to the encoder). Returns a summary.
    """
    import torch
    import torch.nn.functional as F

    t0 = time.time()
    rng = random.Random(f"{seed}:head-warmup")
    orders = max(1, min(MAX_LABEL_ORDERS, MAX_WARMUP_PROMPTS // max(1, len(records))))
    data = _features(model, _prompts(records, rng, orders, prepare))
    if data is None or steps <= 0:
        return {"steps": 0, "prompts": 0, "seconds": round(time.time() - t0, 2)}
    X, mask, gold = data
    head = model.classifier
    opt = torch.optim.AdamW(head.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)

    def logits(idx):
        return head(X[idx]).squeeze(-1).masked_fill(~mask[idx], float("-inf"))

    for _ in range(steps):
        idx = torch.randint(len(gold), (min(batch_size, len(gold)),), generator=gen).to(gold.device)
        loss = F.cross_entropy(logits(idx), gold[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        everything = torch.arange(len(gold), device=gold.device)
        acc = (logits(everything).argmax(-1) == gold).float().mean().item()
        loss = F.cross_entropy(logits(everything), gold).item()
    return {
        "steps": steps,
        "prompts": len(gold),
        "label_orders": orders,
        "train_accuracy": round(acc, 4),
        "train_loss": round(loss, 4),
        "seconds": round(time.time() - t0, 2),
    }
