"""The gliner2 package's own API client against Sift, method by method, beside the local library.

Every public method of ``GLiNER2.from_api(...)`` (gliner2/api_client.py) runs against the server at
``SIFT_URL`` with ``SIFT_KEY``, and the same method of ``GLiNER2.from_pretrained(MODEL_DIR)`` runs on the
same checkpoint; ``compare`` checks each pair: identical structure, equal labels, texts and offsets,
scores within ``TOLERANCE``. Prints one JSON report on stdout (test/local/gliner2Client.test.ts reads it).

usage: python gliner2_client_check.py run          (env SIFT_URL, SIFT_KEY, MODEL_DIR)
       python gliner2_client_check.py selftest     (the comparator on answers that differ)
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TOLERANCE = 1e-3


def compare(api, local, path="$"):
    """Differences between two answers, and the largest score difference seen: ``(diffs, max_diff)``."""
    diffs = []
    worst = 0.0

    def walk(a, b, at):
        nonlocal worst
        if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str):
            if a != b or type(a) is not type(b):
                diffs.append(f"{at}: api {a!r} != local {b!r}")
        elif isinstance(a, int) and isinstance(b, int):
            if a != b:
                diffs.append(f"{at}: api {a} != local {b}")
        elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
            worst = max(worst, abs(a - b))
            if abs(a - b) > TOLERANCE:
                diffs.append(f"{at}: api {a} vs local {b} (differs by {abs(a - b):.2e})")
        elif isinstance(a, dict) and isinstance(b, dict):
            if list(a) != list(b) and set(a) != set(b):
                diffs.append(f"{at}: api keys {sorted(a)} != local keys {sorted(b)}")
            for k in a.keys() & b.keys():
                walk(a[k], b[k], f"{at}.{k}")
        elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                diffs.append(f"{at}: api {len(a)} items != local {len(b)}: api {a!r} local {b!r}")
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{at}[{i}]")
        else:
            diffs.append(f"{at}: api {type(a).__name__} {a!r} != local {type(b).__name__} {b!r}")

    walk(api, local, path)
    return diffs, worst


TEXTS = [
    "Apple CEO Tim Cook announced the iPhone 15 in Cupertino on September 12, 2023.",
    "Satya Nadella, who leads Microsoft, spoke in Seattle about Azure and the new Surface laptop.",
    "The striker Lionel Messi joined Inter Miami in July 2023 after leaving Paris Saint-Germain.",
]
LONG = " ".join(TEXTS * 2)  # two chunks of LONG_KW
ENTITIES = ["company", "person", "product", "location", "date"]
SENTIMENT = {"sentiment": ["positive", "negative", "neutral"]}
TWO_TASKS = {
    "sentiment": ["positive", "negative", "neutral"],
    "topic": {"labels": ["technology", "sports", "business"], "multi_label": True, "cls_threshold": 0.2},
}
PRODUCT = {"product": ["name::str", "maker::str::the company that makes it", "features::list"]}
RELATIONS = ["works_for", "located_in"]
LONG_KW = {"chunk_size": 64, "chunk_overlap": 16}


def build_schema(model):
    """The same builder calls on the client's SchemaAPI and the library's Schema."""
    return (
        model.create_schema()
        .entities(["person", "company"])
        .classification("sentiment", ["positive", "negative", "neutral"])
        .structure("product")
        .field("name", dtype="str")
        .field("kind", dtype="str", choices=["phone", "laptop", "car"])
        .field("uses", choices=["calls", "photos", "games"])
        .relations(["works_for"])
    )


def classify_one(model, local):
    """``classify_text`` with one task. Its wire form (``{categories}``) drops the task's name, which is part of the
    library's prompt: the server names the task ``classification`` and the client renames it in the answer, so the
    library runs it under that name too, renamed the same way."""
    if not local:
        return model.classify_text

    def run(text, tasks, **kw):
        ((name, labels),) = tasks.items()
        out = model.classify_text(text, {"classification": labels}, **kw)
        return {name: out["classification"]} if kw.get("format_results", True) else out

    return run


def calls(model, local=False):
    """``(name, thunk)`` for every public method, with the options that change the answer's shape."""
    t0 = TEXTS[0]
    classify_text = classify_one(model, local)
    out = []
    shapes = (
        {},
        {"include_confidence": True},
        {"include_spans": True},
        {"include_confidence": True, "include_spans": True},
    )
    for kw in shapes:
        tag = ",".join(kw) or "plain"
        out += [
            (f"extract_entities[{tag}]", lambda kw=kw: model.extract_entities(t0, ENTITIES, **kw)),
            (f"extract_relations[{tag}]", lambda kw=kw: model.extract_relations(t0, RELATIONS, **kw)),
        ]
    for kw in (shapes[0], shapes[3]):
        tag = ",".join(kw) or "plain"
        out += [
            (f"classify_text[{tag}]", lambda kw=kw: classify_text(t0, SENTIMENT, **kw)),
            (f"extract_json[{tag}]", lambda kw=kw: model.extract_json(t0, PRODUCT, **kw)),
            (f"extract[{tag}]", lambda kw=kw: model.extract(t0, build_schema(model), **kw)),
        ]
    raw = {"format_results": False, "include_confidence": True, "include_spans": True}
    both = {"include_confidence": True, "include_spans": True}
    out += [
        ("extract_entities[format_results=False]", lambda: model.extract_entities(t0, ENTITIES, format_results=False)),
        ("extract_entities[format_results=False,all]", lambda: model.extract_entities(t0, ENTITIES, **raw)),
        ("classify_text[format_results=False]", lambda: classify_text(t0, SENTIMENT, format_results=False)),
        ("extract_json[format_results=False,all]", lambda: model.extract_json(t0, PRODUCT, **raw)),
        (
            "extract_relations[format_results=False]",
            lambda: model.extract_relations(t0, RELATIONS, format_results=False),
        ),
        ("extract_relations[format_results=False,all]", lambda: model.extract_relations(t0, RELATIONS, **raw)),
        ("extract[format_results=False,all]", lambda: model.extract(t0, build_schema(model), **raw)),
        ("extract_entities[threshold=0.3]", lambda: model.extract_entities(t0, ENTITIES, threshold=0.3, **both)),
        ("classify_text[two tasks, multi_label]", lambda: model.classify_text(t0, TWO_TASKS, include_confidence=True)),
        ("batch_extract_entities", lambda: model.batch_extract_entities(TEXTS, ENTITIES, batch_size=2, **both)),
        ("batch_classify_text", lambda: model.batch_classify_text(TEXTS, TWO_TASKS, include_confidence=True)),
        ("batch_extract_json", lambda: model.batch_extract_json(TEXTS, PRODUCT, **both)),
        ("batch_extract_relations", lambda: model.batch_extract_relations(TEXTS, RELATIONS, **both)),
        ("batch_extract", lambda: model.batch_extract(TEXTS, build_schema(model), **both)),
        ("extract_entities_long", lambda: model.extract_entities_long(LONG, ENTITIES, **both, **LONG_KW)),
        (
            "batch_extract_entities_long",
            lambda: model.batch_extract_entities_long([LONG, TEXTS[1]], ENTITIES, **LONG_KW),
        ),
        ("classify_text_long", lambda: model.classify_text_long(LONG, SENTIMENT, include_confidence=True, **LONG_KW)),
        ("batch_classify_text_long", lambda: model.batch_classify_text_long([LONG, TEXTS[2]], SENTIMENT, **LONG_KW)),
        ("extract_json_long", lambda: model.extract_json_long(LONG, PRODUCT, **both, **LONG_KW)),
        ("batch_extract_json_long", lambda: model.batch_extract_json_long([LONG, TEXTS[0]], PRODUCT, **LONG_KW)),
        ("extract_relations_long", lambda: model.extract_relations_long(LONG, RELATIONS, **both, **LONG_KW)),
        ("batch_extract_relations_long", lambda: model.batch_extract_relations_long([LONG], RELATIONS, **LONG_KW)),
        ("extract_long", lambda: model.extract_long(LONG, build_schema(model), **both, **LONG_KW)),
        ("batch_extract_long", lambda: model.batch_extract_long([LONG, TEXTS[1]], build_schema(model), **LONG_KW)),
    ]
    return out


def errors(url):
    """How the client reports Sift's errors: a bad key and a bad threshold."""
    from gliner2 import GLiNER2
    from gliner2.api_client import AuthenticationError, ValidationError

    out = {}
    try:
        GLiNER2.from_api(api_key="sk_not-a-key", api_base_url=url, max_retries=0).extract_entities(TEXTS[0], ["person"])
        out["bad_key"] = "no error"
    except AuthenticationError as e:
        out["bad_key"] = {"error": "AuthenticationError", "status": e.status_code, "message": str(e)}
    except Exception as e:  # noqa: BLE001 - reported, and the test fails on it
        out["bad_key"] = {"error": type(e).__name__, "message": str(e)}
    client = GLiNER2.from_api(api_key=os.environ["SIFT_KEY"], api_base_url=url, max_retries=0)
    try:
        client.extract_entities(TEXTS[0], ["person"], threshold=1.5)
        out["bad_threshold"] = "no error"
    except ValidationError as e:
        out["bad_threshold"] = {"error": "ValidationError", "status": e.status_code, "message": str(e)}
    except Exception as e:  # noqa: BLE001
        out["bad_threshold"] = {"error": type(e).__name__, "message": str(e)}
    return out


def run():
    from gliner2 import GLiNER2

    warnings.simplefilter("ignore")
    url = os.environ["SIFT_URL"]
    # the README's snippet (test/local/gliner2Client.test.ts copies it): only the key and the base URL change
    api = GLiNER2.from_api(api_key=os.environ["SIFT_KEY"], api_base_url=url)
    local = GLiNER2.from_pretrained(os.environ["MODEL_DIR"])
    local.eval()
    # The library's own *_long runs its chunks with max_len=chunk_size, a cap in its word splitter's tokens, which
    # count more than the chunker's (punctuation), so it cuts the end of a full chunk; the client's *_long sends each
    # chunk whole (the wire has no max_len), so the reference runs the library's *_long without that cap.
    batch_extract = local.batch_extract
    local.batch_extract = lambda *args, max_len=None, **kw: batch_extract(*args, **kw)
    report = {"compared": [], "failures": [], "max_score_diff": 0.0, "seconds": {"api": 0.0, "local": 0.0}}
    for (name, api_call), (_, local_call) in zip(calls(api), calls(local, local=True)):
        try:
            t0 = time.perf_counter()
            got = api_call()
            t1 = time.perf_counter()
            want = local_call()
            report["seconds"]["api"] += t1 - t0
            report["seconds"]["local"] += time.perf_counter() - t1
        except Exception as e:  # noqa: BLE001 - a call that raises is a failure of its own
            report["failures"].append({"method": name, "diffs": [f"raised {type(e).__name__}: {e}"]})
            continue
        diffs, worst = compare(got, want)
        report["compared"].append(name)
        report["max_score_diff"] = max(report["max_score_diff"], worst)
        if diffs:
            report["failures"].append({"method": name, "diffs": diffs[:10], "api": got, "local": want})
    report["errors"] = errors(url)
    return report


def selftest():
    """The comparator on answers that differ in a score, a span, a label and a shape: each must be reported."""
    local = {"entities": {"person": [{"text": "Tim Cook", "confidence": 0.99, "start": 10, "end": 18}]}}
    cases = {
        "score": {"entities": {"person": [{"text": "Tim Cook", "confidence": 0.98, "start": 10, "end": 18}]}},
        "span": {"entities": {"person": [{"text": "Tim Cook", "confidence": 0.99, "start": 11, "end": 18}]}},
        "label": {"entities": {"people": [{"text": "Tim Cook", "confidence": 0.99, "start": 10, "end": 18}]}},
        "shape": {"entities": {"person": {"text": "Tim Cook", "confidence": 0.99, "start": 10, "end": 18}}},
        "same": json.loads(json.dumps(local)),
    }
    return {name: compare(api, local)[0] for name, api in cases.items()}


if __name__ == "__main__":
    print(json.dumps(run() if sys.argv[1:] == ["run"] else selftest()))
