"""Which weights a job keeps: the checkpoint with the best validation F1, not the last step.

On a few hundred rows validation F1 rises and then often falls again (the model over-fits the small
training set, or a late learning-rate phase knocks it off a good point). Every evaluated checkpoint is
a candidate; the one with the highest F1 (ties: the lower validation loss, then the earlier one)
becomes the job's model: its ``final`` checkpoint, the exported files and the metrics all come from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple


def score(checkpoint: Dict[str, Any]) -> Optional[Tuple[float, float]]:
    """Sort key of an evaluated checkpoint (higher is better); None when it has no validation F1."""
    metrics = checkpoint.get("metrics") or {}
    f1 = metrics.get("f1")
    if not isinstance(f1, (int, float)):
        return None
    loss = metrics.get("eval_loss")
    return float(f1), -float(loss) if isinstance(loss, (int, float)) else 0.0


def select_best(checkpoints: Iterable[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
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
            raise RuntimeError(f"adapter checkpoint {checkpoint_dir} does not fit the model: unexpected {unexpected[:5]}")
        return
    model.load_state_dict(load_file(str(checkpoint_dir / "model.safetensors")))
