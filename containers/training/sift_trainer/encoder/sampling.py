"""gliner2's training-time prompt sampling, as Sift's encoder jobs and the mini build configure it."""

from __future__ import annotations

from typing import Any


def sampling_config(overrides: dict[str, Any] | None = None, single_label: bool = False):
    """gliner2 training-time prompt sampling tuned for small data without label descriptions.

    gliner2's defaults replace 20% of entity label sets by "entity 1..n" and 50% of class label sets by
    "label 1..n" (meaningful only with descriptions, which Sift rows rarely carry) and drop 50% of class
    labels; on small CPU budgets that is mostly noise, so those rates are lowered.
    """
    from gliner2.processor import SamplingConfig

    kw: dict[str, Any] = {
        "synthetic_entity_label_prob": 0.0,
        "synthetic_label_prob": 0.1,
        "remove_classification_label_prob": 0.2,
        "include_true_label_prob": 0.5,
    }
    if single_label:  # every single-label row has a gold label; a prompt without it teaches nothing
        kw["include_true_label_prob"] = 1.0
    kw.update(overrides or {})
    return SamplingConfig(**kw)
