"""The trainer's metrics against the hand-computed cases shared with the TypeScript evaluation scorer.

test/fixtures/evaluation/cases.json (derivations in cases.md) is also consumed by
test/core/evaluation/scoring.test.ts: both implementations must give the same numbers. The fixture's
predictions are in the Sift encoder API shape; ``from_api_result`` turns them into the gliner2 output
shape that ``score_predictions`` reads during training.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sift_trainer.data.metrics import from_api_result, score_predictions
from sift_trainer.data.rows import infer_tasks

FIXTURE = Path(__file__).resolve().parents[3] / "test" / "fixtures" / "evaluation" / "cases.json"
if not FIXTURE.exists():  # the container image carries containers/training only
    pytest.skip(f"shared fixture not found: {FIXTURE}", allow_module_level=True)

DATA = json.loads(FIXTURE.read_text(encoding="utf-8"))
TOL = DATA["tolerance"]
CASES = DATA["cases"]
HEADS = ("per_entity", "per_label", "per_field", "per_relation")


def test_fixture_covers_every_head():
    keys = {k for c in CASES for k in c["expected"]}
    assert {"per_entity", "per_label", "per_field", "per_relation"} <= keys
    assert len(CASES) >= 8


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case):
    rows = case["rows"]
    info = infer_tasks(rows)
    results = [from_api_result(p) for p in case["predictions"]]
    assert len(results) == len(rows)
    m = score_predictions(rows, results, info)
    exp = case["expected"]
    for k in ("precision", "recall", "f1"):
        assert abs(m[k] - exp[k]) <= TOL, (k, m[k], exp[k])
    assert m["n_examples"] == exp["support"]["rows"]
    for head in HEADS:
        if head not in exp:
            assert head not in m, (head, m.get(head))
            continue
        assert sorted(m[head]) == sorted(exp[head]), head
        for key, want in exp[head].items():
            got = m[head][key]
            assert (got["tp"], got["fp"], got["fn"], got["support"]) == (
                want["tp"],
                want["fp"],
                want["fn"],
                want["support"],
            ), (head, key, got)
            for k in ("precision", "recall", "f1"):
                assert abs(got[k] - want[k]) <= TOL, (head, key, k, got[k], want[k])


def test_from_api_result_shapes():
    api = {
        "entities": [{"text": "Tim", "label": "person", "score": 0.9, "start": 0, "end": 3}],
        "classifications": {"classification": [{"label": "a", "score": 0.7}]},
        "structures": {"order": [{"item": [{"text": "tea", "score": 0.8, "start": 4, "end": 7}], "who": None}]},
        "relations": {
            "r": [
                {
                    "head": {"text": "Tim", "score": 1, "start": 0, "end": 3},
                    "tail": {"text": "tea", "score": 1, "start": 4, "end": 7},
                    "score": 1,
                }
            ]
        },
    }
    out = from_api_result(api)
    assert out["entities"] == {"person": [{"text": "Tim", "start": 0, "end": 3, "confidence": 0.9}]}
    assert out["classification"] == [{"label": "a", "confidence": 0.7}]
    assert out["order"] == api["structures"]["order"]
    assert out["relation_extraction"] == api["relations"]
    assert from_api_result(None) == {} and from_api_result({}) == {}


def test_whitespace_class_is_str_isspace():
    # src/core/evaluation/scoring/normalize.ts spells out the same character class; it must stay Python's str.split() whitespace
    from sift_trainer.data.metrics import _WS, _norm, _ws

    differ = [
        hex(c) for c in range(0x110000) if 0xD800 > c or c > 0xDFFF if bool(_WS.fullmatch(chr(c))) != chr(c).isspace()
    ]
    assert differ == []
    assert _ws("  a\u00a0\u2003b\t\nc\u3000 ") == "a b c" and _norm(" Zürich  AG ") == "zürich ag"
