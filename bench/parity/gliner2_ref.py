"""Reference side of bench/parity/encoder-parity.ts and bench/serving/encoder.ts: runs the Python `gliner2`
library (PyTorch, CPU) on the cases the TS side sends and prints canonical results as JSON.

usage: .venv/bin/python bench/parity/gliner2_ref.py parity MODEL_DIR CASES.json OUT.json
       .venv/bin/python bench/parity/gliner2_ref.py bench  MODEL_DIR CASES.json OUT.json
"""
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from gliner2 import AutoExtractor  # noqa: E402 (GLiNER2 for span checkpoints, the boundary extractor for GLiNER2.5)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "containers", "training"))
from sift_trainer.export.gliner2_reference import build_schema, reference_results  # noqa: E402


def main():
    mode, model_dir, cases_path, out_path = sys.argv[1:5]
    torch.set_num_threads(int(os.environ.get("REF_THREADS", "0")) or torch.get_num_threads())
    model = AutoExtractor.from_pretrained(model_dir)
    model.eval()
    cases = json.load(open(cases_path))
    out = []
    if mode == "parity":
        out = reference_results(model, cases)
    else:
        for case in cases:
            thr = case.get("threshold", 0.5)
            schema = build_schema(case["schema"], thr)
            texts = case["texts"]
            bs = case["batch_size"]
            model.batch_extract(texts[:bs], schema, batch_size=bs, threshold=thr)  # warm-up
            lat = []
            c0 = time.process_time()
            t0 = time.perf_counter()
            for i in range(0, len(texts), bs):
                t1 = time.perf_counter()
                model.batch_extract(texts[i:i + bs], schema, batch_size=bs, threshold=thr, include_confidence=True, include_spans=True)
                lat.append((time.perf_counter() - t1) * 1000)
            total = time.perf_counter() - t0
            cpu = time.process_time() - c0  # CPU seconds of this process: what to compare on a shared, loaded machine
            out.append({"name": case["name"], "batch_size": bs, "texts": len(texts), "seconds": total, "cpu_seconds": cpu, "latencies_ms": lat})
    json.dump(out, open(out_path, "w"))


if __name__ == "__main__":
    main()
