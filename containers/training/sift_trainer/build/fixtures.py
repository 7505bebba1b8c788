"""Parity fixtures for the TypeScript encoder engine: ``python -m sift_trainer.build.fixtures --model DIR --out FILE``.

For each (text, schema) case the file records what gliner2 (Python, the reference) does:
- the prompt pre-tokens per schema, the subword ``input_ids`` (no CLS/SEP), the positions of the
  ``[P]/[E]/[C]/[R]/[L]`` first subwords per schema and of each word's first subword;
- the text words with their code-point ``start``/``end`` offsets (after the trailing-"." rule);
- the pred count per non-classification schema (argmax of count_pred on [P]);
- the final ``extract(..., include_confidence=True, include_spans=True)`` output at the given threshold.
A TS implementation that reproduces these from the ONNX fragments is at parity with the Python library.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..files import write_json
from ..process import configure_process

CASES: list[dict[str, Any]] = [
    {"text": "Tim Cook is the CEO of Apple Inc. in Cupertino", "schema": {"entities": ["person", "company", "city"]}},
    {
        "text": "Contact Zoë Müller at zoe@example.com or visit https://example.org today!",
        "schema": {"entities": {"person": "names of people", "email": "email addresses", "url": "web addresses"}},
    },
    {
        "text": "The service was terrible and the food was cold.",
        "schema": {"classifications": [{"task": "sentiment", "labels": ["positive", "negative", "neutral"]}]},
    },
    {
        "text": "Great camera, awful battery, fast delivery.",
        "schema": {
            "classifications": [
                {"task": "aspects", "labels": ["camera", "battery", "delivery", "price"], "multi_label": True}
            ]
        },
    },
    {
        "text": "Order 3 Nova headphones for $120 and 2 Orion tablets for $640.",
        "schema": {
            "structures": {
                "order": {
                    "fields": [
                        {"name": "item", "dtype": "str"},
                        {"name": "quantity", "dtype": "str"},
                        {"name": "price", "dtype": "str"},
                    ]
                }
            }
        },
    },
    {
        "text": "Alice Smith works for Acme Corp. Bob Novak lives in Berlin.",
        "schema": {"relations": ["works_for", "lives_in"], "entities": ["person", "company", "city"]},
    },
    {
        "text": "Book a single room at the Grand Hotel for 2 nights 🙂 please",
        "schema": {
            "structures": {
                "booking": {
                    "fields": [
                        {"name": "hotel", "dtype": "str"},
                        {"name": "room_type", "dtype": "str", "choices": ["single", "double", "suite"]},
                        {"name": "nights", "dtype": "str"},
                    ]
                }
            },
            "classifications": [{"task": "intent", "labels": ["book_hotel", "cancel_booking"]}],
        },
    },
]


def build(model_dir: Path, threshold: float = 0.3) -> dict[str, Any]:
    import torch
    from gliner2 import GLiNER2, Schema

    model = GLiNER2.from_pretrained(str(model_dir))
    model.eval()
    proc = model.processor
    tok = proc.tokenizer
    out_cases = []
    for case in CASES:
        schema = Schema.from_dict(case["schema"])
        rec = proc.transform_record(case["text"], schema)
        norm_text = proc._normalize_text(case["text"])
        words = [
            {"word": w, "start": int(st), "end": int(en)} for (w, st, en) in proc.word_splitter(norm_text, lower=True)
        ]
        assert [w["start"] for w in words] == list(rec.start_token_idx)[-len(words) :] if words else True
        with torch.no_grad():
            ids = torch.tensor([rec.input_ids], dtype=torch.long)
            hidden = model.encoder(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]
            counts = []
            for spos, ttype in zip(rec.schema_special_positions, rec.task_types):
                if ttype == "classifications" or not spos:
                    counts.append(None)
                    continue
                counts.append(int(model.count_pred(hidden[spos[0]].unsqueeze(0)).argmax(-1).item()))
        result = model.extract(case["text"], schema, threshold=threshold, include_confidence=True, include_spans=True)
        out_cases.append(
            {
                "text": case["text"],
                "schema": case["schema"],
                "threshold": threshold,
                "normalized_text": norm_text,
                "schema_pre_tokens": rec.schema_tokens_list,
                "task_types": rec.task_types,
                "text_tokens": rec.text_tokens,
                "words": words,
                "input_ids": [int(i) for i in rec.input_ids],
                "tokens": tok.convert_ids_to_tokens(rec.input_ids),
                "schema_special_positions": rec.schema_special_positions,
                "text_word_first_positions": rec.text_word_first_positions,
                "pred_counts": counts,
                "result": result,
            }
        )
    return {
        "model_dir": str(model_dir),
        "gliner2": __import__("importlib.metadata").metadata.version("gliner2"),
        "cases": out_cases,
    }


def main(argv=None) -> int:
    configure_process()
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threshold", type=float, default=0.3)
    a = ap.parse_args(argv)
    data = build(Path(a.model), a.threshold)
    write_json(Path(a.out), data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
