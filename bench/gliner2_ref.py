"""Reference side of bench/encoder-parity.ts and bench/encoder.ts: runs the Python `gliner2`
library (PyTorch, CPU) on the cases the TS side sends and prints canonical results as JSON.

usage: .venv/bin/python bench/gliner2_ref.py parity MODEL_DIR CASES.json OUT.json
       .venv/bin/python bench/gliner2_ref.py bench  MODEL_DIR CASES.json OUT.json
"""
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from gliner2 import GLiNER2  # noqa: E402
from gliner2.inference.schema import Schema  # noqa: E402


def build_schema(spec, threshold):
    s = Schema()
    for st in spec.get("structures", []):
        b = s.structure(st["name"])
        for f in st["fields"]:
            b.field(f["name"], dtype=f.get("dtype", "list"), choices=f.get("choices") or None,
                    description=f.get("description"), threshold=f.get("threshold"))
    if spec.get("entities"):
        ents = {}
        for e in spec["entities"]:
            cfg = {}
            if e.get("description"):
                cfg["description"] = e["description"]
            if e.get("threshold") is not None:
                cfg["threshold"] = e["threshold"]
            ents[e["name"]] = cfg
        s.entities(ents)
    if spec.get("relations"):
        rels = {}
        for r in spec["relations"]:
            cfg = {}
            if r.get("description"):
                cfg["description"] = r["description"]
            if r.get("threshold") is not None:
                cfg["threshold"] = r["threshold"]
            rels[r["name"]] = cfg
        s.relations(rels)
    for c in spec.get("classifications", []):
        kw = {}
        if c.get("multiLabel") and c.get("topK") is not None:
            kw["top_k"] = c["topK"]
        thr = c.get("threshold")
        s.classification(c["task"], c["labels"], multi_label=bool(c.get("multiLabel")),
                         cls_threshold=thr if thr is not None else threshold, **kw)
    return s


def span_key(prefix, v):
    return f"{prefix}|{v['start']}|{v['end']}|{v['text']}"


def canon(res, spec):
    """Flatten a formatted gliner2 result (include_confidence + include_spans) to {key: score}."""
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
        r = model.batch_extract([texts[i] for i in short], schema, batch_size=case.get("batch_size", 8), threshold=thr,
                                include_confidence=True, include_spans=True)
        for i, x in zip(short, r):
            results[i] = x
    if long_:
        r = model.batch_extract_long([texts[i] for i in long_], schema, batch_size=8, threshold=thr,
                                     include_confidence=True, include_spans=True,
                                     chunk_size=case.get("chunk_words", 200), chunk_overlap=case.get("chunk_overlap", 32))
        for i, x in zip(long_, r):
            results[i] = x
    return results


def main():
    mode, model_dir, cases_path, out_path = sys.argv[1:5]
    torch.set_num_threads(int(os.environ.get("REF_THREADS", "0")) or torch.get_num_threads())
    model = GLiNER2.from_pretrained(model_dir)
    model.eval()
    cases = json.load(open(cases_path))
    out = []
    if mode == "parity":
        for case in cases:
            res = run_case(model, case)
            out.append({"name": case["name"], "results": [canon(r, case["schema"]) for r in res]})
    else:
        for case in cases:
            thr = case.get("threshold", 0.5)
            schema = build_schema(case["schema"], thr)
            texts = case["texts"]
            bs = case["batch_size"]
            model.batch_extract(texts[:bs], schema, batch_size=bs, threshold=thr)  # warm-up
            lat = []
            t0 = time.perf_counter()
            for i in range(0, len(texts), bs):
                t1 = time.perf_counter()
                model.batch_extract(texts[i:i + bs], schema, batch_size=bs, threshold=thr, include_confidence=True, include_spans=True)
                lat.append((time.perf_counter() - t1) * 1000)
            total = time.perf_counter() - t0
            out.append({"name": case["name"], "batch_size": bs, "texts": len(texts), "seconds": total, "latencies_ms": lat})
    json.dump(out, open(out_path, "w"))


if __name__ == "__main__":
    main()
