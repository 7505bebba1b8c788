"""The realistic build rows (``build/realistic.py`` + ``build/world.py``): what the base model learns from.

A wrong gold span here becomes a wrong habit of every user's base model, so the rows are checked for the
properties the module promises: determinism, every gold mention in its text, one label per kind, and
variety (the point of the module).
"""

from __future__ import annotations

from collections import Counter

from sift_trainer.build import realistic, synthetic


def _rows(n: int, seed: int):
    g = synthetic.Gen(__import__("random").Random(seed))
    fns = (realistic.gen_entities, realistic.gen_relation)
    return [fns[i % 2](g) for i in range(n)]


def test_rows_are_deterministic_across_calls():
    assert _rows(300, seed=11) == _rows(300, seed=11)
    assert _rows(50, seed=11) != _rows(50, seed=12)


def test_every_gold_mention_is_in_its_text():
    for rec in _rows(1500, seed=3):
        text, out = rec["input"], rec["output"]
        for label, mentions in out.get("entities", {}).items():
            assert len(mentions) == len(set(mentions)), (label, mentions)
            for m in mentions:
                assert m and m in text, (m, text)
        for rel in out.get("relations", []):
            (name, args), = rel.items()
            assert args["head"] in text and args["tail"] in text and args["head"] != args["tail"], (name, text)


def test_labels_of_one_prompt_never_share_a_kind():
    import random

    r = random.Random(5)
    kinds = sorted({k for ks in realistic.LABELS.values() for k in ks})
    for _ in range(2000):
        present = r.sample(kinds, k=r.randint(1, 5))
        chosen = realistic._choose_labels(present, r)
        seen: Counter = Counter(k for ks in chosen.values() for k in ks)
        assert all(c == 1 for c in seen.values()), chosen
    for scheme in realistic.SCHEMES:
        seen = Counter(k for ks in scheme.values() for k in ks)
        assert all(c == 1 for c in seen.values()), scheme


def test_a_mention_is_gold_under_the_label_that_covers_its_kind():
    pieces = [("Ana Silva", "person"), (" flew from ", None), ("Lisbon", "city"), (" to ", None), ("Peru", "country")]
    ents = realistic._entities(pieces, {"location": realistic.LOC, "organization": realistic.ORG})
    assert ents == {"location": ["Lisbon", "Peru"], "organization": []}  # the person is in the text, not asked


def test_values_are_varied():
    w = realistic.world(0)
    import random

    r = random.Random(1)
    for kind, at_least in (("person", 400), ("company", 300), ("city", 200), ("band", 100), ("film", 100), ("device", 150)):
        values = {w.value(kind, r) for _ in range(1000)}
        assert len(values) >= at_least, (kind, len(values))


def test_the_build_mixture_uses_the_realistic_rows():
    fns = [f for f, _ in synthetic.GENERATORS]
    assert realistic.gen_entities in fns and realistic.gen_relation in fns
    assert abs(sum(w for _, w in synthetic.GENERATORS) - 1.0) < 1e-9
