"""Dataset rows (docs/reference/decisions.md#dataset-rows) -> gliner2 training records, plus validation and split."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENCODER_COLUMNS = ("entities", "label", "labels", "json_structures", "relations")
CLASSIFICATION_TASK = "classification"  # task name used for label/labels columns (see manifest)


class DatasetError(ValueError):
    """Raised with a human-readable reason; ``errors`` lists row-level problems."""

    def __init__(self, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.errors = errors or []


def read_rows(channel_dir: Path) -> list[dict[str, Any]]:
    """Read every .jsonl/.json/.csv file of a channel directory (sorted by name)."""
    if not channel_dir.exists():
        raise DatasetError(f"data channel not found: {channel_dir}")
    files = sorted(
        p for p in channel_dir.rglob("*") if p.is_file() and p.suffix.lower() in (".jsonl", ".json", ".csv", ".ndjson")
    )
    if not files:
        raise DatasetError(f"no .jsonl/.json/.csv files in {channel_dir}")
    rows: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for fp in files:
        suffix = fp.suffix.lower()
        if suffix == ".csv":
            with open(fp, newline="", encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    rows.append({k: v for k, v in row.items() if k is not None})
        elif suffix == ".json":
            with open(fp, encoding="utf-8") as f:
                data = json.load(f)
            if isinstance(data, dict) and "rows" in data:
                data = data["rows"]
            if not isinstance(data, list):
                raise DatasetError(f"{fp.name}: expected a JSON array of rows")
            rows.extend(data)
        else:
            with open(fp, encoding="utf-8") as f:
                for i, line in enumerate(f):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        errors.append(
                            {
                                "row": len(rows) + len(errors),
                                "field": None,
                                "message": f"{fp.name} line {i + 1}: invalid JSON ({e.msg})",
                            }
                        )
    if errors:
        raise DatasetError(f"{len(errors)} unreadable row(s); first: {errors[0]['message']}", errors)
    if not rows:
        raise DatasetError(f"dataset in {channel_dir} has no rows")
    return rows


# ---------------------------------------------------------------------------
# Heads and vocabularies
# ---------------------------------------------------------------------------


@dataclass
class TaskInfo:
    heads: list[str]
    entity_labels: list[str] = field(default_factory=list)
    class_labels: list[str] = field(default_factory=list)
    multi_label: bool = False
    structures: dict[str, list[str]] = field(default_factory=dict)  # name -> fields (first-seen order)
    structure_list_fields: dict[str, list[str]] = field(default_factory=dict)
    relations: list[str] = field(default_factory=list)
    # what the dataset asked for that training cannot do, and what was done instead (job warnings)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "heads": self.heads,
            "entity_labels": self.entity_labels,
            "classification": {
                "task": CLASSIFICATION_TASK,
                "labels": self.class_labels,
                "multi_label": self.multi_label,
            }
            if self.class_labels
            else None,
            "structures": {
                k: {"fields": v, "list_fields": self.structure_list_fields.get(k, [])}
                for k, v in self.structures.items()
            },
            "relations": self.relations,
        }

    def schema(self) -> dict[str, Any]:
        """The inference schema (docs/reference/decisions.md#schema-object) that covers every head of this dataset."""
        s: dict[str, Any] = {}
        if self.entity_labels:
            s["entities"] = list(self.entity_labels)
        if self.class_labels:
            s["classifications"] = [
                {"task": CLASSIFICATION_TASK, "labels": list(self.class_labels), "multi_label": self.multi_label}
            ]
        if self.structures:
            s["structures"] = {
                name: {
                    "fields": [
                        {"name": f, "dtype": "list" if f in self.structure_list_fields.get(name, []) else "str"}
                        for f in fields
                    ]
                }
                for name, fields in self.structures.items()
            }
        if self.relations:
            s["relations"] = list(self.relations)
        return s


def _norm_entities(value: Any) -> list[tuple[str, str, int | None, int | None]]:
    out = []
    if value is None:
        return out
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, dict):  # gliner-native {label: [mentions]}
        for lab, ms in value.items():
            for m in ms or []:
                out.append((str(m), str(lab), None, None))
        return out
    if not isinstance(value, list):
        raise ValueError("entities must be a list")
    for e in value:
        if isinstance(e, (list, tuple)) and len(e) >= 2:
            out.append((str(e[0]), str(e[1]), None, None))
        elif isinstance(e, dict):
            if "text" not in e or "label" not in e:
                raise ValueError("each entity needs 'text' and 'label'")
            s, t = e.get("start"), e.get("end")
            out.append(
                (str(e["text"]), str(e["label"]), int(s) if s is not None else None, int(t) if t is not None else None)
            )
        else:
            raise ValueError("entity entries must be {text,label,start?,end?} or [text,label]")
    return out


def _norm_relations(value: Any) -> list[tuple[str, str, str]]:
    out = []
    if value is None:
        return out
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, list):
        raise ValueError("relations must be a list")
    for r in value:
        if isinstance(r, dict) and "relation" in r:
            out.append((str(r["relation"]), str(r["head"]), str(r["tail"])))
        elif isinstance(r, dict) and len(r) == 1:  # gliner-native {rel: {head, tail}}
            ((name, v),) = r.items()
            out.append((str(name), str(v["head"]), str(v["tail"])))
        else:
            raise ValueError("relation entries must be {relation, head, tail}")
    return out


def _norm_structures(value: Any) -> list[tuple[str, dict[str, Any]]]:
    out = []
    if value is None:
        return out
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise ValueError("json_structures must be a list of {structure_name: {field: value}}")
    for inst in value:
        if not isinstance(inst, dict):
            raise ValueError("json_structures entries must be objects")
        for name, fields in inst.items():
            if not isinstance(fields, dict):
                raise ValueError(f"structure {name!r} must map field names to values")
            out.append((str(name), fields))
    return out


def _norm_labels(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            value = json.loads(s)
        else:
            return [s] if s else []
    if not isinstance(value, list):
        raise ValueError("labels must be a list of strings")
    return [str(x) for x in value]


def _present(row: dict[str, Any], col: str) -> bool:
    v = row.get(col)
    return v is not None and v != "" and v != []


def infer_tasks(rows: list[dict[str, Any]]) -> TaskInfo:
    cols = set()
    for r in rows:
        for c in ENCODER_COLUMNS:
            if c in r and r[c] is not None and r[c] != "":
                cols.add(c)
    if "label" in cols and "labels" in cols:
        raise DatasetError("dataset mixes 'label' and 'labels'; use one of them consistently")
    heads = []
    info = TaskInfo(heads=heads)
    ent_labels: dict[str, None] = {}
    class_labels: dict[str, None] = {}
    rels: dict[str, None] = {}
    for r in rows:
        try:
            for _, lab, _, _ in _norm_entities(r.get("entities")):
                ent_labels.setdefault(lab)
            if "label" in cols and _present(r, "label"):
                class_labels.setdefault(str(r["label"]))
            if "labels" in cols:
                for lab in _norm_labels(r.get("labels")):
                    class_labels.setdefault(lab)
            for name, fields in _norm_structures(r.get("json_structures")):
                fl = info.structures.setdefault(name, [])
                for fname, v in fields.items():
                    if fname not in fl:
                        fl.append(fname)
                    if isinstance(v, list):
                        lf = info.structure_list_fields.setdefault(name, [])
                        if fname not in lf:
                            lf.append(fname)
            for rel, _, _ in _norm_relations(r.get("relations")):
                rels.setdefault(rel)
        except (ValueError, KeyError, TypeError, json.JSONDecodeError):
            continue  # reported by validate_rows
    if "entities" in cols:
        heads.append("entities")
    if "label" in cols or "labels" in cols:
        heads.append("classification")
    if "json_structures" in cols:
        heads.append("json_structures")
    if "relations" in cols:
        heads.append("relations")
    info.entity_labels = list(ent_labels)
    info.class_labels = list(class_labels)
    info.multi_label = "labels" in cols
    info.relations = list(rels)
    if not heads:
        raise DatasetError(
            "dataset columns fit no encoder head: expected one of entities, label, labels, json_structures, relations "
            f"(found columns: {sorted({k for r in rows[:50] for k in r})})"
        )
    return info


def require_trainable(info: TaskInfo) -> TaskInfo:
    """Training's own rule on top of ``infer_tasks`` (scoring a few rows may see one label; training may not).

    A classification head whose dataset holds fewer than two distinct labels has nothing to choose
    between (gliner2 refuses such a task): the other heads are trained and ``info.warnings`` says so,
    or, when it is the only head, the dataset is refused with the reason.
    """
    if "classification" not in info.heads or len(info.class_labels) >= 2:
        return info
    column = "labels" if info.multi_label else "label"
    found = f"only {info.class_labels[0]!r}" if info.class_labels else "no label at all"
    why = (
        f"the '{column}' column holds {found} across the dataset: classification needs at least two "
        "distinct labels to choose between"
    )
    if info.heads == ["classification"]:
        raise DatasetError(f"{why}; add rows of the other labels", [{"row": None, "field": column, "message": why}])
    info.heads.remove("classification")
    info.class_labels = []
    info.warnings.append(
        f"{why}, so the classification head was not trained; the other heads ({', '.join(info.heads)}) were"
    )
    return info


def _contains(text: str, value: str) -> bool:
    return value.lower() in text.lower()


def row_to_record(row: dict[str, Any], info: TaskInfo) -> dict[str, Any]:
    """One Sift row -> gliner2 record {"input","output"}; raises ValueError on bad values."""
    text = row.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("'text' must be a non-empty string")
    out: dict[str, Any] = {}
    if "entities" in info.heads:
        ents = {lab: [] for lab in info.entity_labels}  # absent labels are negatives
        for m, lab, s, e in _norm_entities(row.get("entities")):
            if s is not None and e is not None:
                if not (0 <= s < e <= len(text)):
                    raise ValueError(f"entity {m!r}: offsets [{s},{e}) out of range")
                if text[s:e] != m:
                    raise ValueError(f"entity {m!r}: text[{s}:{e}] is {text[s:e]!r}")
            elif not _contains(text, m):
                raise ValueError(f"entity {m!r} is not a substring of text")
            if m not in ents[lab]:
                ents[lab].append(m)
        out["entities"] = ents
    if "classification" in info.heads:
        if info.multi_label:
            true = _norm_labels(row.get("labels"))
        else:
            true = [str(row["label"])] if _present(row, "label") else []
        if true:
            out["classifications"] = [
                {
                    "task": CLASSIFICATION_TASK,
                    "labels": list(info.class_labels),
                    "true_label": true,
                    "multi_label": bool(info.multi_label),
                }
            ]
    if "json_structures" in info.heads:
        insts = []
        for name, fields in _norm_structures(row.get("json_structures")):
            clean = {}
            for fname, v in fields.items():
                vals = v if isinstance(v, list) else [v]
                for x in vals:
                    if x is None or x == "":
                        continue
                    if not isinstance(x, str):
                        raise ValueError(f"json_structures {name}.{fname}: values must be strings")
                    if x not in text:
                        raise ValueError(f"json_structures {name}.{fname}: {x!r} is not a verbatim substring of text")
                clean[fname] = [x for x in vals if x] if isinstance(v, list) else (v or "")
            # fields of this structure seen elsewhere in the dataset but absent here are negatives
            for fname in info.structures.get(name, []):
                if fname not in clean:
                    clean[fname] = [] if fname in info.structure_list_fields.get(name, []) else ""
            insts.append({name: clean})
        if insts:
            out["json_structures"] = insts
    if "relations" in info.heads:
        rels = []
        for rel, h, t in _norm_relations(row.get("relations")):
            for role, v in (("head", h), ("tail", t)):
                if not _contains(text, v):
                    raise ValueError(f"relation {rel!r}: {role} {v!r} is not a substring of text")
            rels.append({rel: {"head": h, "tail": t}})
        if rels:
            out["relations"] = rels
    if not out or all(not v for v in out.values()):
        raise ValueError("row has no labels for any head")
    return {"input": text, "output": out}


def convert(rows: list[dict[str, Any]], info: TaskInfo) -> list[dict[str, Any]]:
    records, errors = [], []
    for i, r in enumerate(rows):
        try:
            if not isinstance(r, dict):
                raise ValueError("row must be a JSON object")
            records.append(row_to_record(r, info))
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
            errors.append({"row": i, "field": None, "message": str(e)})
    if errors:
        head = "; ".join(f"row {e['row']}: {e['message']}" for e in errors[:5])
        more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
        raise DatasetError(f"{len(errors)} invalid row(s): {head}{more}", errors)
    return records


def split(rows: list[Any], fraction: float, seed: int, min_val: int = 1) -> tuple[list[Any], list[Any]]:
    """Deterministic shuffle + split; returns (train, validation)."""
    if fraction <= 0 or len(rows) < 4:
        return list(rows), []
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    n_val = max(min_val, round(len(rows) * fraction))
    n_val = min(n_val, len(rows) - 2)
    val = [rows[i] for i in sorted(idx[:n_val])]
    train = [rows[i] for i in sorted(idx[n_val:])]
    return train, val


def is_decoder_rows(rows: list[dict[str, Any]]) -> bool:
    r = rows[0] if rows else {}
    return isinstance(r, dict) and (
        "messages" in r
        or ("prompt" in r and ("chosen" in r or "answer" in r or "completion" in r))
        or ("prompt" in r and "text" not in r)
    )
