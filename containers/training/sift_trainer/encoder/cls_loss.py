"""Classification loss for single-label jobs: softmax cross-entropy over the prompt's labels.

gliner2's span model scores each ``[L]`` label token with one logit and trains them with a binary
cross-entropy *summed* over the labels. With one gold among n labels the cheapest way down that loss
is to push every logit to the base rate 1/n without looking at the text; measured on banking77
(20-150 labels) fine-tuning sat exactly there (loss ~= -log(1/n) + (n-1)*-log(1-1/n), accuracy at
chance; docs/experiments/training.md "Classification with many labels"). Single-label prediction ranks the
logits under a softmax (gliner2 ``class_act="auto"``), so training the same softmax with
cross-entropy gives the gradient only the *relative* order of the gold label against the others:
no all-negative shortcut. Multi-label tasks and rows without exactly one gold label keep gliner2's
binary loss.

The override is bound to the loaded model instance (the library stays untouched); it changes the
loss only, so checkpoints, ONNX export and inference are unaffected.
"""

from __future__ import annotations

import types
from typing import Any


def classification_loss(logits, target, single_label: bool):
    """One task's loss: logits and 0/1 target of the labels in its prompt."""
    import torch
    import torch.nn.functional as F

    if single_label and int(target.sum().item()) == 1 and target.numel() > 1:
        gold = torch.argmax(target).unsqueeze(0)
        return F.cross_entropy(logits.unsqueeze(0), gold, reduction="sum")
    return F.binary_cross_entropy_with_logits(logits, target, reduction="sum")


def install(model) -> None:
    """Route a single-label ``model``'s per-sample classification loss through :func:`classification_loss`."""
    import torch

    original = model._compute_sample_loss  # bound library method: entities, structures, relations, counts

    def _compute_sample_loss(
        self,
        token_embeddings,
        embs_per_schema: list[list[Any]],
        task_types: list[str],
        structure_labels: list[Any],
        device,
        span_scores_per_schema: list | None = None,
    ) -> dict[str, Any]:
        cls_tasks = [i for i, t in enumerate(task_types) if t == "classifications" and embs_per_schema[i]]
        # the library skips a task whose schema embeddings are empty: let it do everything but classification
        rest = [[] if i in cls_tasks else e for i, e in enumerate(embs_per_schema)]
        out = original(token_embeddings, rest, task_types, structure_labels, device, span_scores_per_schema)
        for i in cls_tasks:
            logits = self.classifier(torch.stack(embs_per_schema[i])[1:]).squeeze(-1)  # [1:]: skip the [P] token
            target = torch.tensor(structure_labels[i], dtype=torch.float, device=device)
            if logits.shape != target.shape:  # the library would fail the sample too; say why
                raise ValueError(f"classification logits {tuple(logits.shape)} vs target {tuple(target.shape)}")
            out["classification"] = out["classification"] + classification_loss(logits, target, single_label=True)
        return out

    model._compute_sample_loss = types.MethodType(_compute_sample_loss, model)
