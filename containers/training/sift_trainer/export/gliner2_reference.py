"""The Python `gliner2` library's answers in a canonical form, for parity checks against the TS engine
(bench/parity/encoder-parity.ts, and `sift models import`, which refuses a checkpoint whose export disagrees).

A case is ``{"name", "texts", "schema" (the TS EncoderSchema), "threshold"?, "chunked"?}``; ``canon``
flattens one formatted result to ``{key: score}`` exactly as src/encoder/parity.ts ``canonResult`` does.
"""

from __future__ import annotations

from gliner2.inference.schema import Schema


def _label_configs(items):
    """Entity types or relations as gliner2 takes them: name -> {description?, threshold?}."""
    return {
        it["name"]: {
            **({"description": it["description"]} if it.get("description") else {}),
            **({"threshold": it["threshold"]} if it.get("threshold") is not None else {}),
        }
        for it in items
    }


def build_schema(spec, threshold):
    s = Schema()
    for st in spec.get("structures", []):
        b = s.structure(st["name"])
        for f in st["fields"]:
            b.field(
                f["name"],
                dtype=f.get("dtype", "list"),
                choices=f.get("choices") or None,
                description=f.get("description"),
                threshold=f.get("threshold"),
            )
    if spec.get("entities"):
        s.entities(_label_configs(spec["entities"]))
    if spec.get("relations"):
        s.relations(_label_configs(spec["relations"]))
    for c in spec.get("classifications", []):
        kw = {}
        if c.get("multiLabel") and c.get("topK") is not None:
            kw["top_k"] = c["topK"]
        thr = c.get("threshold")
        s.classification(
            c["task"],
            c["labels"],
            multi_label=bool(c.get("multiLabel")),
            cls_threshold=thr if thr is not None else threshold,
            **kw,
        )
    return s


def span_key(prefix, v):
    return f"{prefix}|{v['start']}|{v['end']}|{v['text']}"


def canon(res, spec, threshold=0.5):
    """Flatten a formatted gliner2 result (include_confidence + include_spans) to {key: score}.

    Multi-label classification keeps only labels at or above the threshold: where none reaches it gliner2
    falls back to the best label, and Sift returns none by design (docs/reference/decisions.md#multi-label-threshold)."""
    out = {}
    ents = res.get("entities")
    if isinstance(ents, dict):
        for label, spans in ents.items():
            if isinstance(spans, dict):
                spans = [spans]
            for v in spans or []:
                out[span_key(f"E|{label}", v)] = v["confidence"]
            out[f"E|{label}|present"] = 1.0
    for c in spec.get("classifications", []):
        v = res.get(c["task"])
        if v is None:
            continue
        items = v if isinstance(v, list) else [v]
        if c.get("multiLabel"):
            thr = c.get("threshold") if c.get("threshold") is not None else threshold
            items = [it for it in items if it["confidence"] >= thr]
        items = sorted(items, key=lambda it: -it["confidence"])  # the API lists labels by score
        for rank, it in enumerate(items):
            out[f"C|{c['task']}|{rank}|{it['label']}"] = it["confidence"]
    for st in spec.get("structures", []):
        for i, inst in enumerate(res.get(st["name"], []) or []):
            for fname, v in inst.items():
                vals = v if isinstance(v, list) else [v]
                for k, x in enumerate(vals):
                    if x is None:
                        out[f"S|{st['name']}|{i}|{fname}|null"] = 0.0
                    elif "start" in x:
                        out[span_key(f"S|{st['name']}|{i}|{fname}|{k}", x)] = x["confidence"]
                    else:
                        out[f"S|{st['name']}|{i}|{fname}|{k}|choice|{x['text']}"] = x["confidence"]
    rels = res.get("relation_extraction", {}) or {}
    for r in spec.get("relations", []):
        for i, inst in enumerate(rels.get(r["name"], []) or []):
            out[span_key(f"R|{r['name']}|{i}|head", inst["head"])] = inst["head"]["confidence"]
            out[span_key(f"R|{r['name']}|{i}|tail", inst["tail"])] = inst["tail"]["confidence"]
    return out


def run_case(model, case):
    thr = case.get("threshold", 0.5)
    schema = build_schema(case["schema"], thr)
    texts = case["texts"]
    chunked = case.get("chunked") or [1] * len(texts)
    results = [None] * len(texts)
    short = [i for i, n in enumerate(chunked) if n == 1]
    long_ = [i for i, n in enumerate(chunked) if n > 1]
    if short:
        r = model.batch_extract(
            [texts[i] for i in short],
            schema,
            batch_size=case.get("batch_size", 8),
            threshold=thr,
            include_confidence=True,
            include_spans=True,
        )
        for i, x in zip(short, r):
            results[i] = x
    if long_:
        r = model.batch_extract_long(
            [texts[i] for i in long_],
            schema,
            batch_size=8,
            threshold=thr,
            include_confidence=True,
            include_spans=True,
            chunk_size=case.get("chunk_words", 200),
            chunk_overlap=case.get("chunk_overlap", 32),
        )
        for i, x in zip(long_, r):
            results[i] = x
    return results


def reference_results(model, cases):
    """Canonical results of ``model`` on every case: ``[{"name", "results": [{key: score}, ...]}]``."""
    return [
        {"name": c["name"], "results": [canon(r, c["schema"], c.get("threshold", 0.5)) for r in run_case(model, c)]}
        for c in cases
    ]
