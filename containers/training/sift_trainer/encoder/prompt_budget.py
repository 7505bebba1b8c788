"""Schema prompts that fit the encoder's positions: negative-label sampling for training, label groups
for prediction.

GLiNER2 is a uni-encoder: the schema prompt (``( [P] task ( [L] a [L] b … ) )`` per task, gliner2
``processor._transform_schema``) and the text share one encoder pass. An encoder with absolute
position embeddings (BERT/MiniLM: 512) cannot take a longer sequence; the plain gliner2 trainer then
fails with an index error deep inside the encoder. Two things make large label sets work:

- **Training** (:class:`PromptFitter`, used through :func:`sampled_dataset`): an example whose prompt
  could exceed the limit is trained with its gold labels (entity types with mentions, true
  classification labels, structure fields with values, every relation) plus a seeded random subset of
  its negative labels that fits, drawn again each time the example is read (every epoch). The bound is
  the *worst case* of gliner2's training-time prompt augmentation: with probability 0.5 a
  classification (0.2 a structure) is renamed to ``label 1 … label n`` / ``field 1 … field n`` and the
  real names are appended as ``[DESCRIPTION] label i: <real name>`` — that is why banking77's 77 intents
  (366 prompt tokens at inference) crash training (up to ~820 tokens). Examples that fit keep every
  label and are passed through untouched.
- **Prediction** (:class:`GroupedExtractor`, a model proxy for ``metrics.evaluate``): when a schema's
  prompt plus a text does not fit, the schema is split into label groups that fit, each group is run,
  and the results are merged: entities, structures (kept whole) and relations are per label, so their
  union is the merge; classification groups are scored with sigmoid over every label and the raw logits
  are recovered and combined under one softmax (single-label) or thresholded (multi-label).

Only a label set that can never fit (one label, with its task wrapper and ``MIN_TEXT_TOKENS`` of text,
is already longer than the encoder) is an error; the TS service rejects those at job creation with a
char-based lower bound (src/core/training/promptBudget.ts) and the TS engine groups labels the same
way at inference (src/encoder/engine.ts).
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Iterable, Sequence
from typing import Any

#: The least room for text a prompt must leave (tokens); the TS job check uses the same number.
MIN_TEXT_TOKENS = 16
#: Room for text that label groups leave when a text is long (prediction): windows stay useful.
GROUP_TEXT_TOKENS = 128

SEP_STRUCT = "[SEP_STRUCT]"
SEP_TEXT = "[SEP_TEXT]"
DESC = "[DESCRIPTION]"


class PromptTooLong(ValueError):
    """Even the gold labels of an example (or one label of a schema) do not fit the encoder."""


def max_positions(model) -> int | None:
    """Tokens one encoder pass can take, or None when positions are relative (DeBERTa-v2/v3: no hard limit)."""
    cfg = getattr(getattr(model, "encoder", None), "config", None)
    if cfg is None:
        return None
    mt = str(getattr(cfg, "model_type", ""))
    if mt.startswith("deberta") and not getattr(cfg, "position_biased_input", False):
        return None
    if getattr(cfg, "position_embedding_type", "absolute") not in (None, "absolute"):
        return None
    n = getattr(cfg, "max_position_embeddings", None)
    if not n:
        return None
    if "roberta" in mt or mt in ("camembert", "xlm-roberta"):
        n -= int(getattr(cfg, "pad_token_id", 1) or 1) + 1  # positions start after the padding index
    return int(n)


class PromptMeter:
    """Counts subword tokens exactly as gliner2 does: every pre-token tokenized on its own, no CLS/SEP."""

    def __init__(self, processor):
        self.processor = processor
        self._cache: dict[str, int] = {}

    def n(self, token: str) -> int:
        c = self._cache.get(token)
        if c is None:
            pre = self.processor._token_cache.get(token)
            c = len(pre if pre is not None else self.processor.tokenizer.tokenize(token))
            if len(token) <= 256:  # words and labels; whole prompt strings are counted, not kept
                if len(self._cache) >= 100_000:
                    self._cache.clear()
                self._cache[token] = c
        return c

    def tokens(self, pre_tokens: Iterable[str]) -> int:
        return sum(self.n(t) for t in pre_tokens)

    def schema(
        self,
        parent: str,
        fields: Sequence[str],
        marker: str,
        prompt: str | None = None,
        descriptions: dict[str, str] | None = None,
        exact: bool = False,
    ) -> int:
        """Tokens of :func:`schema_tokens`. Not ``exact``: the prompt string is counted piece by piece
        (cached; equal for WordPiece, whose pre-tokenizer splits on the spaces between the pieces)."""
        if exact:
            return self.tokens(schema_tokens(parent, fields, marker, prompt, descriptions))
        n = self.n(f"{parent}: {prompt}" if prompt else parent)
        for label, desc in (descriptions or {}).items():
            if label in fields:
                n += self.n(f"{DESC} {label}:") + self.n(desc or "")
        n += 2 * self.n("(") + 2 * self.n(")") + self.n("[P]") + len(fields) * self.n(marker)
        return n + sum(self.n(f) for f in fields)

    def text(self, text: str, max_words: int | None = None) -> int:
        """``[SEP_TEXT]`` + the (normalized, word-capped) text, as the collator builds it."""
        norm = self.processor._normalize_text(text)
        words = [w for w, _s, _e in self.processor.word_splitter(norm, lower=True)]
        if max_words is not None:
            words = words[:max_words]
        return self.n(SEP_TEXT) + sum(self.n(w) for w in words)


def schema_tokens(
    parent: str,
    fields: Sequence[str],
    marker: str,
    prompt: str | None = None,
    descriptions: dict[str, str] | None = None,
) -> list[str]:
    """gliner2 ``_transform_schema`` (descriptions in label order; gliner2 only reorders them in training)."""
    prompt_str = f"{parent}: {prompt}" if prompt else parent
    for label, desc in (descriptions or {}).items():
        if label in fields:
            prompt_str += f" {DESC} {label}: {desc}"
    out = ["(", "[P]", prompt_str, "("]
    for f in fields:
        out += [marker, f]
    return out + [")", ")"]


# ---------------------------------------------------------------------------
# Training records (sift_trainer.data.rows.row_to_record output)
# ---------------------------------------------------------------------------


def _structure_groups(out: dict[str, Any]) -> dict[str, list[str]]:
    """Structure name -> field names over all its instances, first-seen order (gliner2 ``common``)."""
    groups: dict[str, list[str]] = {}
    for inst in out.get("json_structures") or []:
        for name, fields in inst.items():
            fl = groups.setdefault(name, [])
            for f in fields:
                if f not in fl:
                    fl.append(f)
    return groups


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == [] or (isinstance(v, dict) and not v.get("value"))


class PromptFitter:
    """Fits one gliner2 training record ``{"input", "output"}`` into ``limit`` tokens (see module doc)."""

    def __init__(self, processor, limit: int, max_words: int | None = None, min_text_tokens: int = MIN_TEXT_TOKENS):
        self.meter = PromptMeter(processor)
        self.limit = int(limit)
        self.max_words = max_words
        self.min_text_tokens = min_text_tokens

    # -- prompt lengths ---------------------------------------------------------------------------
    def prompt_tokens(self, out: dict[str, Any], worst: bool, exact: bool = False) -> int:
        """Schema tokens of a record; ``worst`` = the largest prompt gliner2's training augmentation can build."""
        m = self.meter
        sch = lambda *a, **k: m.schema(*a, exact=exact, **k)
        parts: list[int] = []
        ents = out.get("entities")
        if ents:
            names = list(ents.keys())
            descs = out.get("entity_descriptions") or {}
            n = sch("entities", names, "[E]", descriptions=descs)
            if worst:  # synthetic "entity i" names; only given descriptions are kept (renamed)
                syn = [f"entity {i}" for i in range(1, len(names) + 1)]
                sdesc = {syn[names.index(k)]: v for k, v in descs.items() if k in names}
                n = max(n, sch("entities", syn, "[E]", descriptions=sdesc))
            parts.append(n)
        for name, fields in _structure_groups(out).items():
            descs = (out.get("json_descriptions") or {}).get(name, {}) or {}
            n = sch(name, fields, "[C]", descriptions=descs)
            if worst:  # synthetic "field i" with every real field name (or its description) as description
                syn = [f"field {i}" for i in range(1, len(fields) + 1)]
                n = max(n, sch(name, syn, "[C]", descriptions={s: descs.get(f, f) for s, f in zip(syn, fields)}))
            parts.append(n)
        rel_descs = out.get("relation_descriptions") or {}
        rels: dict[str, list[str]] = {}
        for item in out.get("relations") or []:
            for name, fields in item.items():
                rels.setdefault(name, list(fields.keys()))
        for name, fields in rels.items():
            parts.append(sch(name, fields, "[R]", prompt=rel_descs.get(name)))
        for c in out.get("classifications") or []:
            labels = list(c["labels"])
            descs = c.get("label_descriptions") or {}
            examples = c.get("examples") or []
            # inference mode "both": descriptions and examples; training picks a mode, "both" is the largest
            n = sch(c["task"], labels, "[L]", prompt=c.get("prompt"), descriptions=descs) + self._examples_tokens(
                examples, labels
            )
            if worst:
                syn = [f"label {i}" for i in range(1, len(labels) + 1)]
                sdesc = {s: descs.get(l, l) for s, l in zip(syn, labels)}
                sex = [(inp, syn[labels.index(o)] if o in labels else o) for inp, o in examples]
                n = max(
                    n,
                    sch(c["task"], syn, "[L]", prompt=c.get("prompt"), descriptions=sdesc)
                    + self._examples_tokens(sex, syn),
                )
            parts.append(n)
        if not parts:
            return 0
        return sum(parts) + (len(parts) - 1) * m.n(SEP_STRUCT)

    def _examples_tokens(self, examples, fields) -> int:
        return sum(
            self.meter.n(f"[EXAMPLE] {inp} [OUTPUT] {o if isinstance(o, str) else ', '.join(o)}")
            for inp, o in examples
            if o in fields
        )

    def text_tokens(self, text: str) -> int:
        return self.meter.text(text, self.max_words)

    # -- gold / negatives ---------------------------------------------------------------------------
    @staticmethod
    def negatives(out: dict[str, Any]) -> list[tuple[str, Any, str]]:
        """(kind, key, label) of every label without gold in this record, in schema order."""
        neg: list[tuple[str, Any, str]] = []
        for lab, ms in (out.get("entities") or {}).items():
            if not ms:
                neg.append(("entities", None, lab))
        for name, fields in _structure_groups(out).items():
            insts = [i[name] for i in out.get("json_structures") or [] if name in i]
            for f in fields:
                if all(_empty(i.get(f)) for i in insts):
                    neg.append(("json_structures", name, f))
        for ci, c in enumerate(out.get("classifications") or []):
            true = c.get("true_label", [])
            true = true if isinstance(true, list) else [true]
            for lab in c["labels"]:
                if lab not in true:
                    neg.append(("classifications", ci, lab))
        return neg

    @staticmethod
    def restrict(out: dict[str, Any], drop: Iterable[tuple[str, Any, str]]) -> dict[str, Any]:
        """A copy of ``out`` without the given negative labels (gold is never in ``drop``)."""
        drop = set(drop)
        new = copy.deepcopy(out)
        if "entities" in new:
            new["entities"] = {k: v for k, v in new["entities"].items() if ("entities", None, k) not in drop}
            if "entity_descriptions" in new:
                new["entity_descriptions"] = {
                    k: v for k, v in new["entity_descriptions"].items() if k in new["entities"]
                }
        if "json_structures" in new:
            for inst in new["json_structures"]:
                for name, fields in inst.items():
                    for f in list(fields):
                        if ("json_structures", name, f) in drop:
                            del fields[f]
        for ci, c in enumerate(new.get("classifications") or []):
            c["labels"] = [l for l in c["labels"] if ("classifications", ci, l) not in drop]
            if c.get("label_descriptions"):
                c["label_descriptions"] = {k: v for k, v in c["label_descriptions"].items() if k in c["labels"]}
        return new

    # -- the fit ----------------------------------------------------------------------------------------
    def check(self, record: dict[str, Any], worst: bool = True) -> tuple[bool, int, int]:
        """(fits as is, prompt tokens of the gold labels alone, text tokens); raises PromptTooLong if impossible."""
        out = record["output"]
        text_n = self.text_tokens(record["input"])
        if self._fits(out, worst, self.limit - text_n):
            return True, 0, text_n
        neg = self.negatives(out)
        gold = self.prompt_tokens(self.restrict(out, neg), worst)
        if gold == 0 and neg:  # no gold at all (a row of negatives): the prompt needs one label
            gold = min(self.prompt_tokens(self.restrict(out, neg[:i] + neg[i + 1 :]), worst) for i in range(len(neg)))
        room = self.limit - max(text_n, self.meter.n(SEP_TEXT) + self.min_text_tokens)
        if gold > room:
            if gold + self.meter.n(SEP_TEXT) + self.min_text_tokens > self.limit:
                raise PromptTooLong(
                    f"its gold labels alone serialize to {gold} prompt tokens; with at least {self.min_text_tokens} tokens "
                    f"of text that exceeds the encoder's {self.limit} positions"
                )
            raise PromptTooLong(
                f"its text ({text_n - 1} tokens within the first {self.max_words or 'all'} words) and the prompt of its "
                f"gold labels ({gold} tokens) exceed the encoder's {self.limit} positions; shorten the text or lower max_words"
            )
        return False, gold, text_n

    def _fits(self, out: dict[str, Any], worst: bool, budget: int) -> bool:
        # the piece-wise count is exact for WordPiece; near the limit, count the real prompt strings
        n = self.prompt_tokens(out, worst)
        if n > budget:
            return False
        return n <= budget - 8 or self.prompt_tokens(out, worst, exact=True) <= budget

    def fit(self, record: dict[str, Any], rng: random.Random, worst: bool = True) -> dict[str, Any]:
        """The record itself when it fits; else gold + a random prefix of its shuffled negatives that fits."""
        fits, _gold, text_n = self.check(record, worst)
        return record if fits else self.draw(record, rng, worst, text_n)

    def draw(self, record: dict[str, Any], rng: random.Random, worst: bool, text_n: int) -> dict[str, Any]:
        """Gold + the longest prefix of the shuffled negatives that fits (for a record :meth:`check` refused to pass as is)."""
        out = record["output"]
        neg = self.negatives(out)
        order = list(range(len(neg)))
        rng.shuffle(order)
        budget = self.limit - text_n
        without = lambda keep: self.restrict(out, [neg[i] for i in range(len(neg)) if i not in keep])
        # binary search on the shuffled prefix length (prompt length is monotone in it)
        lo, hi = 0, len(order)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._fits(without(set(order[:mid])), worst, budget):
                lo = mid
            else:
                hi = mid - 1
        keep = set(order[:lo])
        if not keep and neg and self.prompt_tokens(without(keep), worst) == 0:
            # no gold and the first draw is too long: the first negative (in draw order) that fits alone
            keep = {next((i for i in order if self._fits(without({i}), worst, budget)), order[0])}
        return {**record, "output": without(keep)}


def cap_class_negatives(out: dict[str, Any], rng: random.Random, max_negatives: int) -> dict[str, Any]:
    """``out`` with at most ``max_negatives`` random non-gold labels per classification task (gold kept).

    For single-label tasks trained with softmax cross-entropy (cls_loss.py): a sampled softmax over gold
    + a fresh random subset each read ranks as well as the full label set, and the prompt — hence the
    encoder pass — stays short however many labels the dataset has.
    """
    by_task: dict[Any, list[tuple[str, Any, str]]] = {}
    for n in PromptFitter.negatives(out):
        if n[0] == "classifications":
            by_task.setdefault(n[1], []).append(n)
    drop: list[tuple[str, Any, str]] = []
    for negs in by_task.values():
        if len(negs) > max_negatives:
            drop += rng.sample(negs, len(negs) - max_negatives)
    return PromptFitter.restrict(out, drop) if drop else out


def sampled_dataset(
    base, fitter: PromptFitter | None, seed: int, training: bool, max_class_negatives: int | None = None
):
    """An ``ExtractorDataset`` over ``base``'s records whose items are fitted on every read.

    Training: a fresh seeded draw per (example, read) — every epoch sees another negative subset;
    evaluation (eval loss): one fixed draw per example, inference-mode prompt (no augmentation).
    ``max_class_negatives`` (training only): first cap each classification task's negatives
    (:func:`cap_class_negatives`); ``fitter`` None: no position limit to fit.
    """
    from gliner2.training.trainer import ExtractorDataset
    from torch.utils.data import get_worker_info

    class _Sampled(ExtractorDataset):
        def __init__(self):  # no super().__init__: the records are already loaded (and shuffled) in base
            self.data = base.data
            self.lengths = base.lengths
            self._reads = [0] * len(self.data)
            self._checked: list[tuple[bool, int, int] | None] = [None] * len(self.data)

        # the reads so far pick each read's draw: a resumed job (resume.py) continues the count
        def state_dict(self) -> dict[str, Any]:
            return {"reads": list(self._reads)}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            self._reads = list(state["reads"])

        def __getitem__(self, idx):
            text, out = super().__getitem__(idx)
            n: int | str = self._reads[idx] if training else 0
            self._reads[idx] += 1
            worker = get_worker_info()
            if training and worker is not None:
                # a DataLoader worker counts only its own reads, from a copy of this dataset: its seed (new for
                # each worker and, unless the workers persist, each epoch) keeps its draws apart from the others'
                n = f"{worker.seed}.{n}"
            if training and max_class_negatives is not None:
                capped = cap_class_negatives(out, random.Random(f"{seed}:{idx}:{n}:cap"), max_class_negatives)
                if capped is not out:  # a new label subset: its fit is checked afresh
                    if fitter is None:
                        return text, capped
                    rec = fitter.fit({"input": text, "output": capped}, random.Random(f"{seed}:{idx}:{n}"), worst=True)
                    return rec["input"], rec["output"]
            if fitter is None:
                return text, out
            rec = {"input": text, "output": out}
            if self._checked[idx] is None:
                self._checked[idx] = fitter.check(rec, worst=training)
            fits, _gold, text_n = self._checked[idx]
            if fits:
                return text, out
            rec = fitter.draw(rec, random.Random(f"{seed}:{idx}:{n}"), training, text_n)
            return rec["input"], rec["output"]

    return _Sampled()


def check_records(
    fitter: PromptFitter, records: list[dict[str, Any]], worst: bool
) -> tuple[int, list[tuple[int, str]]]:
    """(number of records that need sampling, [(index, reason)] of records that cannot fit at all)."""
    sampled, bad = 0, []
    for i, rec in enumerate(records):
        try:
            if not fitter.check(rec, worst)[0]:
                sampled += 1
        except PromptTooLong as e:
            bad.append((i, str(e)))
    return sampled, bad


def rows_over_words(processor, records: list[dict[str, Any]], max_words: int | None) -> list[int]:
    """Indices of the records whose text has more than ``max_words`` words, as gliner2's collator splits them:
    it trains on the first ``max_words`` only (``max_len``), so the rest of such a text, and any gold span in
    it, is not learned. The trainer says how many (the ``long_texts`` event) instead of cutting silently."""
    if not max_words:
        return []
    out = []
    for i, rec in enumerate(records):
        norm = processor._normalize_text(rec["input"])
        words = sum(1 for _ in processor.word_splitter(norm, lower=True))
        # the "." normalization appends is no text: cutting only it cuts nothing
        if words - (norm != rec["input"]) > max_words:
            out.append(i)
    return out


# ---------------------------------------------------------------------------
# Prediction in label groups (validation metrics)
# ---------------------------------------------------------------------------


def _units(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    """Indivisible parts of a ``Schema.to_dict()`` spec, in gliner2's prompt order."""
    units: list[tuple[str, Any]] = []
    for name in spec.get("structures") or {}:
        units.append(("structure", name))
    ents = spec.get("entities")
    for name in ents if isinstance(ents, list) else list((ents or {}).keys()):
        units.append(("entity", name))
    rels = spec.get("relations")
    for name in rels if isinstance(rels, list) else list((rels or {}).keys()):
        units.append(("relation", name))
    for ti, c in enumerate(spec.get("classifications") or []):
        labels = c["labels"]
        for lab in labels if isinstance(labels, list) else list(labels.keys()):
            units.append(("label", (ti, lab)))
    return units


def _field_units(spec: dict[str, Any], name: str) -> list[tuple[str, Any]]:
    return [("field", (name, f["name"])) for f in spec["structures"][name]["fields"]]


def _sub_spec(spec: dict[str, Any], units: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """The spec restricted to ``units``; classification tasks score every label (sigmoid, no cut-off)."""
    want = set(units)
    out: dict[str, Any] = {}
    structs = {}
    for n, v in (spec.get("structures") or {}).items():
        if ("structure", n) in want:
            structs[n] = v
        else:
            fields = [f for f in v["fields"] if ("field", (n, f["name"])) in want]
            if fields:
                structs[n] = {**v, "fields": fields}
    if structs:
        out["structures"] = structs
    for key, kind in (("entities", "entity"), ("relations", "relation")):
        items = spec.get(key)
        if not items:
            continue
        sub = (
            [n for n in items if (kind, n) in want]
            if isinstance(items, list)
            else {n: v for n, v in items.items() if (kind, n) in want}
        )
        if sub:
            out[key] = sub
    cls = []
    for ti, c in enumerate(spec.get("classifications") or []):
        labels = c["labels"]
        if isinstance(labels, list):
            sub = [l for l in labels if ("label", (ti, l)) in want]
        else:
            sub = {l: d for l, d in labels.items() if ("label", (ti, l)) in want}
        if sub:
            cls.append(
                {
                    **{k: v for k, v in c.items() if k not in ("top_k", "cls_threshold", "class_act")},
                    "labels": sub,
                    "multi_label": True,
                    "class_act": "sigmoid",
                    "cls_threshold": 0.0,
                }
            )
    if cls:
        out["classifications"] = cls
    return out


_PAD_LABEL = "\u2400pad"


def _schema(spec: dict[str, Any]):
    """``Schema.from_dict`` that also takes a one-label slice of a classification task (a group's share;
    ``SchemaInput`` wants two labels — a placeholder passes validation and is removed again)."""
    from gliner2 import Schema

    pad = copy.deepcopy(spec)
    padded = []
    for i, c in enumerate(pad.get("classifications") or []):
        if len(c["labels"]) == 1:
            if isinstance(c["labels"], list):
                c["labels"].append(_PAD_LABEL)
            else:
                c["labels"][_PAD_LABEL] = ""
            padded.append(i)
    schema = Schema.from_dict(pad)
    for i in padded:
        cfg = schema.schema["classifications"][i]
        cfg["labels"] = [l for l in cfg["labels"] if l != _PAD_LABEL]
        if cfg.get("label_descriptions"):
            cfg["label_descriptions"].pop(_PAD_LABEL, None)
    return schema


def _logit(p: float) -> float:
    p = min(max(float(p), 1e-12), 1.0 - 1e-12)
    return math.log(p) - math.log1p(-p)


class GroupedExtractor:
    """Model proxy for ``metrics.evaluate``: ``batch_extract`` in label groups when a prompt does not fit.

    Schemas that fit every text are passed to the model unchanged (identical results). Otherwise the
    schema is packed into groups of at most ``limit - GROUP_TEXT_TOKENS`` prompt tokens (a label too large
    for that runs alone); a text still too long for its group's prompt is capped in words (``max_len``)
    for that group — gliner2's ``batch_extract`` has no windows — which only happens for texts near the
    encoder's limit on their own.
    """

    def __init__(self, model, limit: int | None, group_text_tokens: int = GROUP_TEXT_TOKENS):
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_limit", limit)
        object.__setattr__(self, "_group_text", group_text_tokens)
        object.__setattr__(self, "groups_used", 0)

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __setattr__(self, name, value):
        if name == "groups_used":
            object.__setattr__(self, name, value)
        else:
            setattr(self._model, name, value)

    def train(self, mode: bool = True):
        return self._model.train(mode)

    # exact lengths through gliner2's own preprocessing (inference mode)
    def _length(self, text: str, schema_dict: dict[str, Any]) -> int:
        return len(self._model.processor.transform_record(text, schema_dict).input_ids)

    def _prompt_length(self, schema_dict: dict[str, Any]) -> int:
        return self._length("", schema_dict) - 1  # "" becomes "." (one token)

    def batch_extract(self, texts, schemas, *args, **kwargs):
        m = self._model
        if self._limit is None or not texts or isinstance(schemas, list) or not hasattr(schemas, "to_dict"):
            return m.batch_extract(texts, schemas, *args, **kwargs)
        built = schemas.build()
        lengths = [self._length(t, built) for t in texts]
        if max(lengths) <= self._limit:
            return m.batch_extract(texts, schemas, *args, **kwargs)
        spec = schemas.to_dict()
        groups = self.plan(spec)
        object.__setattr__(self, "groups_used", max(self.groups_used, len(groups)))
        meter = PromptMeter(m.processor)
        per_group: list[list[dict[str, Any]]] = []
        for g in groups:
            gb = _schema(g).build()
            glen = [self._length(t, gb) for t in texts]
            res: list[dict[str, Any] | None] = [None] * len(texts)
            ok = [i for i, n in enumerate(glen) if n <= self._limit]
            if ok:
                for i, r in zip(ok, m.batch_extract([texts[i] for i in ok], _schema(g), *args, **kwargs)):
                    res[i] = r
            prompt = self._prompt_length(gb)
            for i in (i for i, n in enumerate(glen) if n > self._limit):
                room, words = self._limit - prompt, 0
                norm = m.processor._normalize_text(texts[i])
                for w, _s, _e in m.processor.word_splitter(norm, lower=True):
                    room -= meter.n(w)
                    if room < 0:
                        break
                    words += 1
                res[i] = m.batch_extract([texts[i]], _schema(g), *args, **{**kwargs, "max_len": max(1, words)})[0]
            per_group.append(res)  # type: ignore[arg-type]
        return [self.merge(spec, [pg[i] for pg in per_group]) for i in range(len(texts))]

    def plan(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Greedy packing of the spec's units into sub-specs whose prompt fits ``limit - group_text_tokens``.

        A structure is one unit unless it alone exceeds the budget; then its fields are split (instances
        are merged back by position — approximate, validation metrics only).
        """
        budget = self._limit - self._group_text
        plen = lambda units: self._prompt_length(_schema(_sub_spec(spec, units)).build())
        units: list[tuple[str, Any]] = []
        for u in _units(spec):
            units += _field_units(spec, u[1]) if u[0] == "structure" and plen([u]) > budget else [u]
        groups: list[list[tuple[str, Any]]] = []
        cur: list[tuple[str, Any]] = []
        for u in units:
            if cur and plen(cur + [u]) > budget:
                groups.append(cur)
                cur = []
            cur.append(u)
            if len(cur) == 1 and plen(cur) + 2 > self._limit:
                raise PromptTooLong(
                    f"{u[0]} {u[1]!r} alone serializes to {plen(cur)} prompt tokens; the encoder takes {self._limit}"
                )
        if cur:
            groups.append(cur)
        return [_sub_spec(spec, g) for g in groups]

    @staticmethod
    def merge(spec: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
        """One text's group results -> the result the full schema would have had (gliner2's formatted shape)."""
        out: dict[str, Any] = {}
        tasks = spec.get("classifications") or []
        task_names = {c["task"] for c in tasks}
        structures = set(spec.get("structures") or {})
        for p in parts:
            for k, v in p.items():
                if k in task_names:
                    continue
                if k in ("entities", "relation_extraction") and isinstance(v, dict):
                    out.setdefault(k, {}).update(v)
                elif k in structures and k in out and isinstance(v, list):  # fields split over groups
                    have = out[k]
                    out[k] = [
                        {**(have[i] if i < len(have) else {}), **(v[i] if i < len(v) else {})}
                        for i in range(max(len(have), len(v)))
                    ]
                else:
                    out[k] = v
        for c in tasks:
            labels = c["labels"] if isinstance(c["labels"], list) else list(c["labels"].keys())
            logits: dict[str, float] = {}
            for p in parts:
                for it in p.get(c["task"]) or []:
                    if isinstance(it, dict) and "label" in it:
                        logits[it["label"]] = _logit(it.get("confidence", 0.0))
            if not logits:
                continue
            scored = [(l, logits[l]) for l in labels if l in logits]
            multi = bool(c.get("multi_label"))
            act = c.get("class_act", "auto")
            sigmoid = act == "sigmoid" or (act == "auto" and multi)
            if sigmoid:
                probs = [(l, 1.0 / (1.0 + math.exp(-x))) for l, x in scored]
            else:
                mx = max(x for _, x in scored)
                ex = [(l, math.exp(x - mx)) for l, x in scored]
                z = sum(e for _, e in ex)
                probs = [(l, e / z) for l, e in ex]
            best = max(range(len(probs)), key=lambda j: probs[j][1])
            if multi:
                thr = c.get("cls_threshold", 0.5)
                chosen = [pr for pr in probs if pr[1] >= thr] or [probs[best]]
                if c.get("top_k") is not None:
                    chosen = sorted(chosen, key=lambda pr: pr[1], reverse=True)[: c["top_k"]]
                out[c["task"]] = [{"label": l, "confidence": s} for l, s in chosen]
            else:
                out[c["task"]] = {"label": probs[best][0], "confidence": probs[best][1]}
        return out
