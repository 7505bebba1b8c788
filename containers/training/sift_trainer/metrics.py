"""F1 / precision / recall of a GLiNER2 model on labelled Sift rows (micro-averaged).

Matching rules (DESIGN.md §3 "Evaluation record"):
- entities: exact ``(label, start, end)``; gold given without offsets counts every occurrence of the
  mention in the text (the gliner2 trainer treats every occurrence as positive too);
- classification: per label (single-label: predicted label vs gold label; multi-label: sets);
- json_structures: per field value (case-insensitive, stripped), predicted instances aligned greedily to
  gold instances of the same structure by number of shared values; breakdown key ``structure.field``;
- relations: ``(relation, head, tail)`` triples (case-insensitive).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .data import CLASSIFICATION_TASK, TaskInfo, _norm_entities, _norm_labels, _norm_relations, _norm_structures


class Counts:
    __slots__ = ("tp", "fp", "fn")

    def __init__(self) -> None:
        self.tp = self.fp = self.fn = 0

    def add(self, tp: int = 0, fp: int = 0, fn: int = 0) -> None:
        self.tp += tp
        self.fp += fp
        self.fn += fn

    def prf(self) -> Dict[str, float]:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return {"f1": round(f, 6), "precision": round(p, 6), "recall": round(r, 6),
                "support": self.tp + self.fn, "tp": self.tp, "fp": self.fp, "fn": self.fn}


def _occurrences(text: str, mention: str) -> List[Tuple[int, int]]:
    out = []
    hay, needle = text, mention
    start = hay.find(needle)
    if start < 0:
        hay, needle = text.lower(), mention.lower()
        start = hay.find(needle)
    while start >= 0 and needle:
        out.append((start, start + len(needle)))
        start = hay.find(needle, start + 1)
    return out


def _norm(v: Any) -> str:
    return " ".join(str(v).split()).lower()


def _span_text(v: Any) -> Optional[str]:
    if v is None:
        return None
    if isinstance(v, dict):
        return v.get("text")
    return str(v)


def gold_entities(row: Dict[str, Any]) -> Set[Tuple[str, int, int]]:
    text = row["text"]
    out = set()
    for (m, lab, s, e) in _norm_entities(row.get("entities")):
        if s is not None and e is not None:
            out.add((lab, s, e))
        else:
            for (a, b) in _occurrences(text, m):
                out.add((lab, a, b))
    return out


def pred_entities(result: Dict[str, Any]) -> Set[Tuple[str, int, int]]:
    out = set()
    for lab, items in (result.get("entities") or {}).items():
        if isinstance(items, dict):
            items = [items]
        for it in items or []:
            if isinstance(it, dict) and "start" in it:
                out.add((lab, int(it["start"]), int(it["end"])))
    return out


def pred_labels(result: Dict[str, Any], task: str) -> List[str]:
    v = result.get(task)
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [v["label"]] if "label" in v else []
    if isinstance(v, list):
        out = []
        for x in v:
            if isinstance(x, dict):
                out.append(x.get("label"))
            else:
                out.append(str(x))
        return [x for x in out if x]
    return []


def _instances_gold(row: Dict[str, Any]) -> Dict[str, List[Dict[str, Set[str]]]]:
    out: Dict[str, List[Dict[str, Set[str]]]] = defaultdict(list)
    for name, fields in _norm_structures(row.get("json_structures")):
        inst = {}
        for f, v in fields.items():
            vals = v if isinstance(v, list) else [v]
            inst[f] = {_norm(x) for x in vals if x not in (None, "")}
        out[name].append(inst)
    return out


def _instances_pred(result: Dict[str, Any], names: Iterable[str]) -> Dict[str, List[Dict[str, Set[str]]]]:
    out: Dict[str, List[Dict[str, Set[str]]]] = {}
    for name in names:
        insts = result.get(name) or []
        if isinstance(insts, dict):
            insts = [insts]
        lst = []
        for inst in insts:
            if not isinstance(inst, dict):
                continue
            d = {}
            for f, v in inst.items():
                vals = v if isinstance(v, list) else [v]
                d[f] = {_norm(t) for t in (_span_text(x) for x in vals) if t}
            lst.append(d)
        out[name] = lst
    return out


def _align(pred: List[Dict[str, Set[str]]], gold: List[Dict[str, Set[str]]]) -> List[Tuple[Optional[int], Optional[int]]]:
    pairs = []
    for i, p in enumerate(pred):
        for j, g in enumerate(gold):
            shared = sum(len(p.get(f, set()) & g.get(f, set())) for f in set(p) | set(g))
            pairs.append((shared, -i, -j, i, j))
    pairs.sort(reverse=True)
    used_p, used_g, out = set(), set(), []
    for shared, _, _, i, j in pairs:
        if i in used_p or j in used_g:
            continue
        used_p.add(i)
        used_g.add(j)
        out.append((i, j))
    out += [(i, None) for i in range(len(pred)) if i not in used_p]
    out += [(None, j) for j in range(len(gold)) if j not in used_g]
    return out


def _pred_relations(result: Dict[str, Any]) -> Set[Tuple[str, str, str]]:
    out = set()
    for rel, items in (result.get("relation_extraction") or {}).items():
        for it in items or []:
            if isinstance(it, dict):
                h, t = _span_text(it.get("head")), _span_text(it.get("tail"))
            elif isinstance(it, (list, tuple)) and len(it) == 2:
                h, t = _span_text(it[0]), _span_text(it[1])
            else:
                continue
            if h and t:
                out.add((rel, _norm(h), _norm(t)))
    return out


def score_predictions(rows: List[Dict[str, Any]], results: List[Dict[str, Any]], info: TaskInfo) -> Dict[str, Any]:
    overall = Counts()
    heads: Dict[str, Counts] = defaultdict(Counts)
    per_entity: Dict[str, Counts] = defaultdict(Counts)
    per_label: Dict[str, Counts] = defaultdict(Counts)
    per_field: Dict[str, Counts] = defaultdict(Counts)
    per_relation: Dict[str, Counts] = defaultdict(Counts)
    # every field / label of the dataset appears in the breakdown, even with zero support
    for name, fields in info.structures.items():
        for f in fields:
            per_field[f"{name}.{f}"]
    for lab in info.class_labels:
        per_label[lab]
    for row, res in zip(rows, results):
        if "entities" in info.heads:
            g, p = gold_entities(row), pred_entities(res)
            for lab in info.entity_labels:
                gl = {x for x in g if x[0] == lab}
                pl = {x for x in p if x[0] == lab}
                tp = len(gl & pl)
                c = (tp, len(pl) - tp, len(gl) - tp)
                per_entity[lab].add(*c)
                heads["entities"].add(*c)
                overall.add(*c)
        if "classification" in info.heads:
            gold = set(_norm_labels(row.get("labels"))) if info.multi_label else ({str(row["label"])} if row.get("label") not in (None, "") else set())
            if gold:
                pred = set(pred_labels(res, CLASSIFICATION_TASK))
                for lab in set(info.class_labels) | gold | pred:
                    tp = int(lab in gold and lab in pred)
                    c = (tp, int(lab in pred and lab not in gold), int(lab in gold and lab not in pred))
                    if any(c):
                        per_label[lab].add(*c)
                        heads["classification"].add(*c)
                        overall.add(*c)
        if "json_structures" in info.heads:
            gold_i = _instances_gold(row)
            pred_i = _instances_pred(res, info.structures.keys())
            for name, fields in info.structures.items():
                gl, pl = gold_i.get(name, []), pred_i.get(name, [])
                for i, j in _align(pl, gl):
                    pi = pl[i] if i is not None else {}
                    gi = gl[j] if j is not None else {}
                    for f in fields:
                        ps, gs = pi.get(f, set()), gi.get(f, set())
                        tp = len(ps & gs)
                        c = (tp, len(ps) - tp, len(gs) - tp)
                        per_field[f"{name}.{f}"].add(*c)
                        heads["json_structures"].add(*c)
                        overall.add(*c)
        if "relations" in info.heads:
            g = {(r, _norm(h), _norm(t)) for (r, h, t) in _norm_relations(row.get("relations"))}
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
    metrics = {"f1": out["f1"], "precision": out["precision"], "recall": out["recall"],
               "n_examples": len(rows),
               "per_head": {k: v.prf() for k, v in heads.items()}}
    if per_entity:
        metrics["per_entity"] = {k: v.prf() for k, v in per_entity.items()}
    if per_label:
        metrics["per_label"] = {k: v.prf() for k, v in per_label.items()}
    if per_field:
        metrics["per_field"] = {k: v.prf() for k, v in per_field.items()}
    if per_relation:
        metrics["per_relation"] = {k: v.prf() for k, v in per_relation.items()}
    return metrics


def predict(model, rows: List[Dict[str, Any]], info: TaskInfo, threshold: float = 0.5, batch_size: int = 8) -> List[Dict[str, Any]]:
    from gliner2 import Schema

    schema = Schema.from_dict(info.schema())
    texts = [r["text"] for r in rows]
    was_training = model.training
    try:
        return model.batch_extract(texts, schema, batch_size=batch_size, threshold=threshold,
                                   include_confidence=True, include_spans=True)
    finally:
        if was_training:
            model.train()


def evaluate(model, rows: List[Dict[str, Any]], info: TaskInfo, threshold: float = 0.5) -> Dict[str, Any]:
    if not rows:
        return {}
    results = predict(model, rows, info, threshold=threshold)
    return score_predictions(rows, results, info)
