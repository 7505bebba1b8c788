"""Where the Python gliner2 library's CPU time goes per text: the encoder forward (the transformer) vs
everything else in ``batch_extract`` (tokenization, span representations, counting, scoring, decoding),
on the texts and schema bench/serving/encoder.ts uses (wnut17 test, 6 entity types), 1 thread.
The counterpart of bench/serving/encoder-profile.ts for the Python side; issue #27 item 4 uses it to
say how far the TS engine can be ahead of the library when both spend the same time in the encoder.

usage: python bench/serving/gliner2_profile.py MODEL_DIR [--texts 96] [--threads 1]
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from gliner2 import GLiNER2  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "containers", "training"))
from sift_trainer.export.gliner2_reference import build_schema  # noqa: E402

LABELS = ["person", "group", "location", "creative work", "product", "corporation"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--texts", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    data = os.environ.get("SIFT_SHARED_DATA", os.path.join(os.getcwd(), "..", "shared", "data"))
    with open(os.path.join(data, "wnut17", "test.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    texts = [r["text"] for r in rows[: a.texts]]
    model = GLiNER2.from_pretrained(a.model_dir).eval()
    spec = {"entities": [{"name": n} for n in LABELS], "classifications": [], "structures": [], "relations": []}
    schema = build_schema(spec, 0.5)
    enc = {"cpu": 0.0, "calls": 0, "tokens": 0, "padded": 0}
    start = {}

    def pre(_m, args, kwargs):
        start["t"] = time.process_time()
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        if ids is not None:
            enc["padded"] += int(ids.numel())
            enc["tokens"] += int(mask.sum()) if mask is not None else int(ids.numel())

    def post(_m, _args, _kwargs, _out):
        enc["cpu"] += time.process_time() - start["t"]
        enc["calls"] += 1

    model.encoder.register_forward_pre_hook(pre, with_kwargs=True)
    model.encoder.register_forward_hook(post, with_kwargs=True)
    print(f"model {a.model_dir}; {len(texts)} wnut17 texts; {a.threads} thread(s); load average {os.getloadavg()[0]:.1f}")
    for bs in (1, 8, 32):
        model.batch_extract(texts[:bs], schema, batch_size=bs, threshold=0.5)  # warm-up
        for k in enc:
            enc[k] = 0
        c0 = time.process_time()
        for i in range(0, len(texts), bs):
            model.batch_extract(texts[i : i + bs], schema, batch_size=bs, threshold=0.5, include_confidence=True, include_spans=True)
        cpu = time.process_time() - c0
        n = len(texts)
        print(
            f"batch {bs}: {cpu * 1000 / n:.1f} CPU ms/text, of which encoder forward {enc['cpu'] * 1000 / n:.1f} "
            f"({enc['cpu'] / cpu * 100:.0f}%), rest {(cpu - enc['cpu']) * 1000 / n:.1f}; encoder calls {enc['calls']}, "
            f"tokens {enc['tokens'] / n:.1f}/text real, {enc['padded'] / n:.1f}/text padded"
        )


if __name__ == "__main__":
    main()
