"""F1 / precision / recall of a GLiNER2 model on labelled Sift rows (micro-averaged).

The rules are the evaluation scorer's (src/core/evaluation/scoring.ts, docs/reference/evaluation.md); the
hand-computed cases in test/fixtures/evaluation/cases.json hold both implementations to them:

- normalising: "ws" = whitespace runs (``str.isspace`` characters) collapsed to one space, trimmed;
  "value" = ws + lower-case;
- a head is scored on a row only when the row has that head's gold column (``entities``,
  ``label``/``labels``, ``json_structures``, ``relations``; an empty list counts); entity types, fields
  and relations outside the dataset's vocabulary are ignored on both sides (classification labels are not);
- entities: exact ``(label, start, end)`` sets (code points); a gold entity without offsets matches
  one leftover prediction of the same label whose text equals the mention after ws-normalising
  (case-sensitive), each such gold consumed at most once;
- classification: single-label = top-1 predicted label (highest score) vs ``label``; multi-label =
  predicted label set vs ``labels``; counted per label;
- json_structures: per ``structure.field``, the multiset of normalised values pooled over all
  predicted instances vs all gold instances of the row;
- relations: sets of ``(relation, value(head), value(tail))`` triples;
- micro-averaged over everything scored; 0/0 = 0.
"""

from __future__ import annotations

import numbers
import re
from collections import Counter, defaultdict
from typing import Any

from .rows import CLASSIFICATION_TASK, TaskInfo, _norm_entities, _norm_labels, _norm_relations, _norm_structures


class Counts:
    __slots__ = ("fn", "fp", "tp")

    def __init__(self) -> None:
        self.tp = self.fp = self.fn = 0

    def add(self, tp: int = 0, fp: int = 0, fn: int = 0) -> None:
        self.tp += tp
        self.fp += fp
        self.fn += fn

    def prf(self) -> dict[str, float]:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return {
            "f1": round(f, 6),
            "precision": round(p, 6),
            "recall": round(r, 6),
            "support": self.tp + self.fn,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
        }


# str.isspace() characters, spelled out exactly as in src/core/evaluation/scoring/normalize.ts
_WS = re.compile("[\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")


def _ws(v: Any) -> str:
    return " ".join(x for x in _WS.split(str(v)) if x)


def _norm(v: Any) -> str:
    return _ws(v).lower()


def _span_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, dict):
        return v.get("text")
    return str(v)


def _has(row: dict[str, Any], col: str) -> bool:
    return row.get(col) not in (None, "")


def _offset(v: Any) -> int | None:
    """An integer offset (JSON may give 3.0), else None; booleans are not offsets."""
    if isinstance(v, bool):
        return None
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def entity_counts(row: dict[str, Any], result: dict[str, Any], labels: list[str]) -> dict[str, tuple[int, int, int]]:
    """(tp, fp, fn) per entity label of one row."""
    allowed = set(labels)
    exact_gold: set[tuple[str, int, int]] = set()
    mention_gold: Counter = Counter()
    for m, lab, s, e in _norm_entities(row.get("entities")):
        if lab not in allowed:
            continue
        if s is not None and e is not None:
            exact_gold.add((lab, s, e))
        else:
            mention_gold[(lab, _ws(m))] += 1
    preds: dict[tuple[str, int, int], str] = {}
    for lab, items in (result.get("entities") or {}).items():
        if lab not in allowed:
            continue
        if isinstance(items, dict):
            items = [items]
        for it in items or []:
            s, e = (_offset(it.get("start")), _offset(it.get("end"))) if isinstance(it, dict) else (None, None)
            if s is not None and e is not None:
                preds.setdefault((lab, s, e), it.get("text") or "")
    out = {lab: [0, 0, 0] for lab in labels}
    leftover: Counter = Counter()
    for k, text in preds.items():
        if k in exact_gold:
            out[k[0]][0] += 1
        else:
            leftover[(k[0], _ws(text))] += 1
    for k in exact_gold:
        if k not in preds:
            out[k[0]][2] += 1
    for k, n in leftover.items():
        hit = min(n, mention_gold.get(k, 0))
        out[k[0]][0] += hit
        # more occurrences of a mention labelled without offsets are not errors (which one was meant is unknown)
        out[k[0]][1] += 0 if k in mention_gold else n - hit
    for k, n in mention_gold.items():
        out[k[0]][2] += n - min(n, leftover.get(k, 0))
    return {lab: tuple(c) for lab, c in out.items()}


def _pred_classes(result: dict[str, Any], task: str) -> list[tuple[str, float]]:
    """(label, score) predictions of a classification task, in the order given."""
    v = result.get(task)
    if v is None:
        return []
    if isinstance(v, (str, dict)):
        v = [v]
    out = []
    if isinstance(v, list):
        for x in v:
            if isinstance(x, dict):
                lab, score = x.get("label"), x.get("confidence", x.get("score"))
            else:
                lab, score = x, None
            if lab:
                out.append((str(lab), float(score) if isinstance(score, (int, float)) else float("-inf")))
    return out


def pred_labels(result: dict[str, Any], task: str, multi_label: bool = True) -> list[str]:
    items = _pred_classes(result, task)
    if multi_label:
        return list(dict.fromkeys(lab for lab, _ in items))
    return [max(items, key=lambda x: x[1])[0]] if items else []  # max() keeps the first on ties


def structure_counts(
    row: dict[str, Any], result: dict[str, Any], structures: dict[str, list[str]]
) -> dict[str, tuple[int, int, int]]:
    """(tp, fp, fn) per ``structure.field`` of one row: normalised values pooled over instances."""
    gold: dict[str, Counter] = defaultdict(Counter)
    pred: dict[str, Counter] = defaultdict(Counter)
    for name, fields in _norm_structures(row.get("json_structures")):
        for f, v in fields.items():
            if f not in structures.get(name, []):
                continue
            for x in v if isinstance(v, list) else [v]:
                n = _norm(x) if isinstance(x, str) else ""
                if n:
                    gold[f"{name}.{f}"][n] += 1
    for name, fnames in structures.items():
        insts = result.get(name) or []
        if isinstance(insts, dict):
            insts = [insts]
        for inst in insts:
            if not isinstance(inst, dict):
                continue
            for f in fnames:
                v = inst.get(f)
                for x in v if isinstance(v, list) else [v]:
                    t = _span_text(x)
                    n = _norm(t) if t else ""
                    if n:
                        pred[f"{name}.{f}"][n] += 1
    out = {}
    for name, fnames in structures.items():
        for f in fnames:
            k = f"{name}.{f}"
            g, p = gold[k], pred[k]
            tp = sum((g & p).values())
            out[k] = (tp, sum(p.values()) - tp, sum(g.values()) - tp)
    return out


def _pred_relations(result: dict[str, Any]) -> set[tuple[str, str, str]]:
    out = set()
    for rel, items in (result.get("relation_extraction") or {}).items():
        for it in items or []:
            if isinstance(it, dict):
                h, t = _span_text(it.get("head")), _span_text(it.get("tail"))
            elif isinstance(it, (list, tuple)) and len(it) == 2:
                h, t = _span_text(it[0]), _span_text(it[1])
            else:
                continue
            h, t = _norm(h) if h else "", _norm(t) if t else ""
            if h and t:
                out.add((rel, h, t))
    return out


def from_api_result(result: dict[str, Any] | None) -> dict[str, Any]:
    """The Sift encoder API's per-text ``result`` (docs/reference/decisions.md#encoder-response) -> the gliner2 output shape scored here."""
    out: dict[str, Any] = {}
    if not isinstance(result, dict):
        return out
    if "entities" in result:
        ents: dict[str, list[dict[str, Any]]] = {}
        for e in result.get("entities") or []:
            ents.setdefault(e["label"], []).append(
                {"text": e.get("text"), "start": e.get("start"), "end": e.get("end"), "confidence": e.get("score")}
            )
        out["entities"] = ents
    for task, items in (result.get("classifications") or {}).items():
        out[task] = [{"label": x["label"], "confidence": x.get("score")} for x in items or []]
    for name, insts in (result.get("structures") or {}).items():
        out[name] = insts
    if "relations" in result:
        out["relation_extraction"] = result.get("relations") or {}
    return out


def score_predictions(rows: list[dict[str, Any]], results: list[dict[str, Any]], info: TaskInfo) -> dict[str, Any]:
    overall = Counts()
    heads: dict[str, Counts] = defaultdict(Counts)
    per_entity: dict[str, Counts] = defaultdict(Counts)
    per_label: dict[str, Counts] = defaultdict(Counts)
    per_field: dict[str, Counts] = defaultdict(Counts)
    per_relation: dict[str, Counts] = defaultdict(Counts)
    # every field / label of the dataset appears in the breakdown, even with zero support
    for name, fields in info.structures.items():
        for f in fields:
            per_field[f"{name}.{f}"]
    for lab in info.class_labels:
        per_label[lab]
    for row, res in zip(rows, results):
        res = res or {}
        if "entities" in info.heads and row.get("entities") is not None:
            for lab, c in entity_counts(row, res, info.entity_labels).items():
                per_entity[lab].add(*c)
                heads["entities"].add(*c)
                overall.add(*c)
        if "classification" in info.heads and _has(row, "labels" if info.multi_label else "label"):
            gold = set(_norm_labels(row.get("labels"))) if info.multi_label else {str(row["label"])}
            pred = set(pred_labels(res, CLASSIFICATION_TASK, info.multi_label))
            for lab in set(info.class_labels) | gold | pred:
                tp = int(lab in gold and lab in pred)
                c = (tp, int(lab in pred and lab not in gold), int(lab in gold and lab not in pred))
                if any(c):
                    per_label[lab].add(*c)
                    heads["classification"].add(*c)
                    overall.add(*c)
        if "json_structures" in info.heads and row.get("json_structures") is not None:
            for k, c in structure_counts(row, res, info.structures).items():
                per_field[k].add(*c)
                heads["json_structures"].add(*c)
                overall.add(*c)
        if "relations" in info.heads and row.get("relations") is not None:
            g = {(r, _norm(h), _norm(t)) for (r, h, t) in _norm_relations(row.get("relations")) if r in info.relations}
            p = {x for x in _pred_relations(res) if x[0] in info.relations}
            for rel in info.relations:
                gl = {x for x in g if x[0] == rel}
                pl = {x for x in p if x[0] == rel}
                tp = len(gl & pl)
                c = (tp, len(pl) - tp, len(gl) - tp)
                per_relation[rel].add(*c)
                heads["relations"].add(*c)
                overall.add(*c)
    out = overall.prf()
    metrics = {
        "f1": out["f1"],
        "precision": out["precision"],
        "recall": out["recall"],
        "n_examples": len(rows),
        "per_head": {k: v.prf() for k, v in heads.items()},
    }
    if per_entity:
        metrics["per_entity"] = {k: v.prf() for k, v in per_entity.items()}
    if per_label:
        metrics["per_label"] = {k: v.prf() for k, v in per_label.items()}
    if per_field:
        metrics["per_field"] = {k: v.prf() for k, v in per_field.items()}
    if per_relation:
        metrics["per_relation"] = {k: v.prf() for k, v in per_relation.items()}
    return metrics


def predict(
    model, rows: list[dict[str, Any]], info: TaskInfo, threshold: float = 0.5, batch_size: int = 8
) -> list[dict[str, Any]]:
    from gliner2 import Schema

    schema = Schema.from_dict(info.schema())
    texts = [r["text"] for r in rows]
    was_training = model.training
    try:
        return model.batch_extract(
            texts, schema, batch_size=batch_size, threshold=threshold, include_confidence=True, include_spans=True
        )
    finally:
        if was_training:
            model.train()


def evaluate(model, rows: list[dict[str, Any]], info: TaskInfo, threshold: float = 0.5) -> dict[str, Any]:
    if not rows:
        return {}
    results = predict(model, rows, info, threshold=threshold)
    return score_predictions(rows, results, info)


def learning_warnings(baseline: dict[str, Any], final: dict[str, Any], n_rows: int) -> list[str]:
    """What a user must be told when a job did not learn: its held-out F1 is no better than its base model's.

    A job that ends ``complete`` with such a model must not look like a good one (the record's ``warnings``).
    """
    if not baseline or final.get("evaluated_on") != "validation":
        return []
    base, got = float(baseline.get("f1", 0.0)), float(final.get("f1", 0.0))
    if got > base:
        return []
    return [
        (
            f"validation F1 {got:.4f} does not beat the base model's {base:.4f} on the same {n_rows} held-out rows: "
            "the fine-tuned model is no better than the model it started from (more rows or epochs, a higher "
            "learning rate, or fewer labels may help)"
        )
    ]
