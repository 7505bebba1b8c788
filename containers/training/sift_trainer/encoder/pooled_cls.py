"""The pooled classifier: a head over the encoder's masked-mean text embedding, trained beside the GLiNER2 heads.

GLiNER2 classifies from each ``[L]`` token of a prompt that lists every label; with many labels those
outputs barely carry the text (docs/experiments/training.md, "Classification"), while the same encoder's
mean-pooled embedding of the text alone separates banking77's intents well (bench/research/cls_probe.py).
So a job whose rows have a ``label``/``labels`` column also fits:

1. optionally, a SetFit-style contrastive stage: pairs of rows with the same / a different label, a
   cosine-similarity loss on their pooled embeddings, training the parameters the job trains (the encoder
   of a full job, the LoRA adapters of a LoRA job) — ``contrastive_tune``;
2. a linear head on the FINAL encoder's L2-normalised pooled embeddings (softmax cross-entropy for a
   ``label`` column, per-label sigmoid BCE for ``labels``) — ``fit``.

The head is exported as ``onnx/pooled_classifier.onnx`` (export/export_pooled.py), fed by the model's own
``encoder.onnx`` on the text alone, tokenized WITH the tokenizer's special tokens, cut at ``max_tokens``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..data.rows import TaskInfo, _norm_labels
from ..job.hyperparameters import HyperparameterError, Hyperparameters

#: the pooled route reads at most this many tokens of a text (and never more than the encoder's positions)
DEFAULT_MAX_TOKENS = 256
#: contrastive pair iterations per row (0 = the frozen encoder's embeddings) and rates per training type:
#: bench/research/pooled_probe.py, docs/experiments/training.md "2026-11-27"
DEFAULT_CONTRASTIVE_ITERATIONS = 1
CONTRASTIVE_LR = {"full": 2e-5, "lora": 2e-4}
HEAD_STEPS = 1500
HEAD_LR = 1e-2
EMBED_BATCH = 32


class PooledHead(nn.Module):
    """Masked mean of ``hidden_states`` over ``attention_mask``, L2-normalised, then one linear layer: the
    whole graph the serving side runs after the encoder (so pooling cannot differ between the two)."""

    def __init__(self, hidden: int, n_labels: int):
        super().__init__()
        self.linear = nn.Linear(hidden, n_labels)

    @staticmethod
    def pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        m = attention_mask.unsqueeze(-1).to(hidden_states.dtype)
        mean = (hidden_states * m).sum(1) / m.sum(1).clamp(min=1.0)
        return mean / mean.norm(dim=-1, keepdim=True).clamp(min=1e-12)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.linear(self.pool(hidden_states, attention_mask))


@dataclass
class PooledClassifier:
    head: PooledHead
    labels: list[str]
    multi_label: bool
    max_tokens: int
    trained_rows: int
    route_metrics: dict[str, Any] = field(default_factory=dict)
    contrastive: dict[str, Any] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        """``onnx/pooled_classifier.json`` (SPEC's pooled-classifier contract)."""
        return {
            "format": 1,
            "labels": list(self.labels),
            "multi_label": bool(self.multi_label),
            "pooling": "mean",
            "max_tokens": int(self.max_tokens),
            "trained_rows": int(self.trained_rows),
            "route_metrics": dict(self.route_metrics),
        }


def max_tokens_for(model) -> int:
    return min(int(getattr(model.encoder.config, "max_position_embeddings", DEFAULT_MAX_TOKENS)), DEFAULT_MAX_TOKENS)


def tokenize(tokenizer, texts: list[str], max_tokens: int) -> dict[str, torch.Tensor]:
    """The text alone with the tokenizer's own special tokens ([CLS] … [SEP]), cut at ``max_tokens``."""
    return tokenizer(
        list(texts), padding=True, truncation=True, max_length=max_tokens, add_special_tokens=True, return_tensors="pt"
    )


def _device(module: nn.Module) -> torch.device:
    return next(module.parameters()).device


def pooled_embeddings(encoder: nn.Module, tokenizer, texts: list[str], max_tokens: int) -> torch.Tensor:
    """Normalised pooled embeddings [n, D] (no grad), in batches."""
    dev, out = _device(encoder), []
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            for i in range(0, len(texts), EMBED_BATCH):
                b = tokenize(tokenizer, texts[i : i + EMBED_BATCH], max_tokens)
                ids, mask = b["input_ids"].to(dev), b["attention_mask"].to(dev)
                h = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
                out.append(PooledHead.pool(h.float(), mask).cpu())
    finally:
        encoder.train(was_training)
    return torch.cat(out) if out else torch.zeros(0, 0)


def targets(rows: list[dict[str, Any]], labels: list[str], multi_label: bool) -> torch.Tensor:
    """Class indices [n] (single-label) or a 0/1 matrix [n, labels] (multi-label)."""
    index = {lab: i for i, lab in enumerate(labels)}
    if not multi_label:
        return torch.tensor([index[str(r["label"])] for r in rows], dtype=torch.long)
    y = torch.zeros(len(rows), len(labels))
    for i, r in enumerate(rows):
        for lab in _norm_labels(r.get("labels")):
            if lab in index:
                y[i, index[lab]] = 1.0
    return y


def _loss(logits: torch.Tensor, y: torch.Tensor, multi_label: bool) -> torch.Tensor:
    if multi_label:
        return nn.functional.binary_cross_entropy_with_logits(logits, y)
    return nn.functional.cross_entropy(logits, y)


def fit_head(
    X: torch.Tensor, y: torch.Tensor, n_labels: int, multi_label: bool, seed: int, steps: int = HEAD_STEPS
) -> PooledHead:
    """Full-batch AdamW on fixed pooled embeddings ``X`` (already normalised): a regularised linear fit."""
    g = torch.Generator().manual_seed(seed)
    head = PooledHead(X.shape[1], n_labels)
    with torch.no_grad():
        head.linear.weight.copy_(torch.randn(head.linear.weight.shape, generator=g) * 0.01)
        head.linear.bias.zero_()
    opt = torch.optim.AdamW(head.parameters(), lr=HEAD_LR, weight_decay=1e-4)
    for _ in range(steps):
        loss = _loss(head.linear(X), y, multi_label)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return head.eval()


def predict_scores(head: PooledHead, X: torch.Tensor, multi_label: bool) -> torch.Tensor:
    with torch.no_grad():
        logits = head.linear(X)
    return torch.sigmoid(logits) if multi_label else torch.softmax(logits, dim=-1)


def route_score(scores: torch.Tensor, y: torch.Tensor, multi_label: bool, threshold: float = 0.5) -> dict[str, Any]:
    """Held-out score in data/metrics.py's terms: single-label micro F1 = accuracy; multi-label micro F1 at 0.5."""
    n = int(scores.shape[0])
    if not multi_label:
        acc = float((scores.argmax(-1) == y).float().mean()) if n else 0.0
        return {"accuracy": round(acc, 4), "f1": round(acc, 4), "n_examples": n}
    pred = scores >= threshold
    gold = y > 0.5
    tp = int((pred & gold).sum())
    fp = int((pred & ~gold).sum())
    fn = int((~pred & gold).sum())
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    exact = float((pred == gold).all(-1).float().mean()) if n else 0.0
    return {
        "f1": round(f1, 4),
        "precision": round(p, 4),
        "recall": round(r, 4),
        "exact_match": round(exact, 4),
        "n_examples": n,
    }


def classification_rows(rows: list[dict[str, Any]], multi_label: bool) -> list[dict[str, Any]]:
    """The rows with a classification answer (mixed datasets may have entity-only rows)."""
    col = "labels" if multi_label else "label"
    return [r for r in rows if r.get(col) not in (None, "", []) and isinstance(r.get("text"), str)]


def _pairs(rows_labels: list[set[str]], iterations: int, rng: random.Random) -> list[tuple[int, int, float]]:
    """SetFit's pair generation: per row and iteration one positive (shares a label) and one negative pair."""
    by_label: dict[str, list[int]] = {}
    for i, labs in enumerate(rows_labels):
        for lab in labs:
            by_label.setdefault(lab, []).append(i)
    pairs: list[tuple[int, int, float]] = []
    n = len(rows_labels)
    for _ in range(iterations):
        for i, labs in enumerate(rows_labels):
            same = [j for lab in sorted(labs) for j in by_label[lab] if j != i]
            if same:
                pairs.append((i, rng.choice(same), 1.0))
            for _try in range(10):
                j = rng.randrange(n)
                if not (rows_labels[j] & labs):
                    pairs.append((i, j, 0.0))
                    break
    rng.shuffle(pairs)
    return pairs


def contrastive_tune(
    encoder: nn.Module,
    tokenizer,
    rows: list[dict[str, Any]],
    multi_label: bool,
    max_tokens: int,
    *,
    iterations: int,
    lr: float,
    seed: int,
    batch_size: int = 16,
    params: list[nn.Parameter] | None = None,
) -> dict[str, Any]:
    """Tunes ``params`` (default: every trainable parameter of ``encoder``) so that rows sharing a label have
    close pooled embeddings (cosine → 1) and rows that do not, orthogonal ones (cosine → 0): SetFit's
    CosineSimilarityLoss. One epoch over the generated pairs, linear decay. Dropout off (as in the head fit)."""
    t0 = time.time()
    rows = classification_rows(rows, multi_label)
    labs = [set(_norm_labels(r.get("labels"))) if multi_label else {str(r["label"])} for r in rows]
    pairs = _pairs(labs, iterations, random.Random(seed))
    if not pairs:
        return {"pairs": 0, "seconds": 0.0}
    params = [p for p in (params if params is not None else encoder.parameters()) if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    steps = (len(pairs) + batch_size - 1) // batch_size
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / steps))
    dev = _device(encoder)
    texts = [r["text"] for r in rows]
    was_training = encoder.training
    encoder.eval()  # dropout off: the pooled embeddings the head is fitted on are eval-mode ones
    torch.manual_seed(seed)
    total = 0.0
    try:
        for s in range(steps):
            batch = pairs[s * batch_size : (s + 1) * batch_size]
            idx = sorted({i for a, b, _ in batch for i in (a, b)})
            pos = {i: k for k, i in enumerate(idx)}
            b = tokenize(tokenizer, [texts[i] for i in idx], max_tokens)
            ids, mask = b["input_ids"].to(dev), b["attention_mask"].to(dev)
            emb = PooledHead.pool(encoder(input_ids=ids, attention_mask=mask).last_hidden_state.float(), mask)
            a = emb[[pos[x] for x, _, _ in batch]]
            c = emb[[pos[y] for _, y, _ in batch]]
            target = torch.tensor([t for _, _, t in batch], device=dev)
            loss = nn.functional.mse_loss((a * c).sum(-1), target)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            total += float(loss)
    finally:
        encoder.train(was_training)
    return {
        "pairs": len(pairs),
        "steps": steps,
        "mean_loss": round(total / steps, 5),
        "seconds": round(time.time() - t0, 2),
    }


def fit(
    model,
    train_rows: list[dict[str, Any]],
    val_rows: list[dict[str, Any]],
    labels: list[str],
    multi_label: bool,
    seed: int,
) -> PooledClassifier:
    """The head on ``model``'s encoder as it is now (the final, exported one), scored on ``val_rows``."""
    max_tokens = max_tokens_for(model)
    tok = model.processor.tokenizer
    tr = classification_rows(train_rows, multi_label)
    Xtr = pooled_embeddings(model.encoder, tok, [r["text"] for r in tr], max_tokens)
    head = fit_head(Xtr, targets(tr, labels, multi_label), len(labels), multi_label, seed)
    route: dict[str, Any] = {}
    va = classification_rows(val_rows, multi_label)
    if va:
        Xva = pooled_embeddings(model.encoder, tok, [r["text"] for r in va], max_tokens)
        route["pooled"] = route_score(
            predict_scores(head, Xva, multi_label), targets(va, labels, multi_label), multi_label
        )
    return PooledClassifier(head, list(labels), multi_label, max_tokens, len(tr), route)


def mode(hp: Hyperparameters, info: TaskInfo) -> str:
    """``pooled_classifier``: "auto" (default) trains it for any dataset with a label/labels column; "off" never."""
    want = str(hp.extra.get("pooled_classifier", "auto")).lower()
    if want not in ("auto", "off"):
        raise HyperparameterError(f"pooled_classifier must be 'auto' or 'off', got {want!r}")
    return "on" if want == "auto" and "classification" in info.heads and info.class_labels else "off"


def contrastive_stage(hp: Hyperparameters, model, rows: list[dict[str, Any]], info: TaskInfo, device) -> dict[str, Any]:
    """The contrastive stage on the job's trained model (a PEFT model for LoRA jobs: its encoder adapters
    train, so the saved adapter carries the stage; a full job's encoder weights otherwise)."""
    try:
        iterations = int(hp.extra.get("contrastive_iterations", DEFAULT_CONTRASTIVE_ITERATIONS))
        lr = float(hp.extra.get("contrastive_lr", CONTRASTIVE_LR[hp.training_type]))
    except (TypeError, ValueError) as e:
        raise HyperparameterError(f"contrastive_iterations / contrastive_lr must be numbers: {e}") from e
    if iterations <= 0:
        return {"iterations": 0}
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    encoder = inner.encoder
    if hp.training_type == "full":
        for p in encoder.parameters():
            p.requires_grad = True
    params = [p for p in encoder.parameters() if p.requires_grad]
    if not params:
        return {"iterations": 0, "skipped": "no trainable encoder parameters"}
    stats = contrastive_tune(
        encoder,
        inner.processor.tokenizer,
        rows,
        info.multi_label,
        max_tokens_for(inner),
        iterations=iterations,
        lr=lr,
        seed=hp.seed,
        params=params,
    )
    return {"iterations": iterations, "lr": lr, **stats}


def gliner2_route(final_metrics: dict[str, Any], multi_label: bool) -> dict[str, Any]:
    """The GLiNER2 route's classification score from the trainer's held-out evaluation, in route_score's terms."""
    head = (final_metrics.get("per_head") or {}).get("classification") or {}
    out = {k: head[k] for k in ("f1", "precision", "recall") if k in head}
    if not multi_label and "f1" in out:
        out["accuracy"] = out["f1"]  # one prediction and one gold per row: micro F1 is accuracy
    return out
