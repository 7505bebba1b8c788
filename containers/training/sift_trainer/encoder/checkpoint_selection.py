"""Which weights a job keeps: the checkpoint with the best validation F1, not the last step.

On a few hundred rows validation F1 rises and then often falls again (the model over-fits the small
training set, or a late learning-rate phase knocks it off a good point). Every evaluated checkpoint is
a candidate; the one with the highest F1 (ties: the lower validation loss, then the earlier one)
becomes the job's model: its ``final`` checkpoint, the exported files and the metrics all come from it.

Only when the held-out rows can tell checkpoints apart: F1 over a handful of gold annotations is
noise (wnut17, 100 rows: the 10 held-out rows hold 2 entities, and the "best" checkpoint was the
first epoch's, 0.667 = one entity found; docs/experiments/training.md "Never below the plain trainer"). Below
MIN_SELECTION_SUPPORT gold annotations the job keeps its last weights and does not stop early.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: gold annotations (entities, labels, fields, relations) the held-out rows need before their F1 picks
#: the job's weights: the standard error of an F1 near 0.5 over n annotations is ~0.5/sqrt(n), 0.11 at 20
MIN_SELECTION_SUPPORT = 20


def validation_support(metrics: dict[str, Any]) -> int:
    """Gold annotations behind a metrics dict from ``data.metrics.evaluate`` (summed over its heads)."""
    return int(sum(int(h.get("support", 0)) for h in (metrics.get("per_head") or {}).values()))


def policy(requested: Any, support: int) -> tuple[str, str]:
    """("best" | "last", why): ``checkpoint_selection`` "best" / "last" as asked; "auto" (the default) by support."""
    requested = str(requested or "auto").lower()
    if requested in ("best", "last"):
        return requested, "requested"
    if requested != "auto":
        raise ValueError(f"checkpoint_selection must be 'auto', 'best' or 'last', got {requested!r}")
    if support >= MIN_SELECTION_SUPPORT:
        return "best", f"{support} gold annotations held out"
    return "last", (
        f"only {support} gold annotations held out (fewer than {MIN_SELECTION_SUPPORT}): "
        "their F1 cannot rank checkpoints, so the last weights are the model"
    )


def score(checkpoint: dict[str, Any]) -> tuple[float, float] | None:
    """Sort key of an evaluated checkpoint (higher is better); None when it has no validation F1."""
    metrics = checkpoint.get("metrics") or {}
    f1 = metrics.get("f1")
    if not isinstance(f1, (int, float)):
        return None
    loss = metrics.get("eval_loss")
    return float(f1), -float(loss) if isinstance(loss, (int, float)) else 0.0


def select_best(checkpoints: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The checkpoint with the best score; the earliest of equals (fewer steps away from the base)."""
    best, best_score = None, None
    for c in checkpoints:
        s = score(c)
        if s is not None and (best_score is None or s > best_score):
            best, best_score = c, s
    return best


def restore_weights(model, checkpoint_dir: Path, adapter: bool) -> None:
    """Load a checkpoint's weights into ``model`` in place (a PeftModel's adapter, or the full state)."""
    from safetensors.torch import load_file

    checkpoint_dir = Path(checkpoint_dir)
    if adapter:
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(model, load_file(str(checkpoint_dir / "adapter_model.safetensors")))
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        if unexpected:
            raise RuntimeError(
                f"adapter checkpoint {checkpoint_dir} does not fit the model: unexpected {unexpected[:5]}"
            )
        return
    model.load_state_dict(load_file(str(checkpoint_dir / "model.safetensors")))
