"""ONNX export of a GLiNER2 *boundary* model's candidate head (issue #32; docs/experiments/boundary.md §B).

The boundary architecture (gliner2 2.1.0 ``architecture: "boundary"``, the GLiNER2.5 family) scores
start/end boundaries instead of enumerated spans. Its inference path from the word and query states to
scored candidates is one graph:

| file                     | inputs                                                        | outputs |
|--------------------------|---------------------------------------------------------------|---------|
| boundary_candidates.onnx | word_embs f32 [B, L, D], word_mask i64 [B, L], queries f32 [B, Q, D], query_mask i64 [B, Q] | cand_idx i64 [B, Q, C, 2] (half-open word spans), pair_logits f32 [B, Q, C], cand_valid bool [B, Q, C], null_logits f32 [B, Q] |

``C`` is the checkpoint's ``candidate_budget``; B, L and Q are dynamic. The encoder and classifier graphs
are the span model's (export_onnx.py). Three export-only patches make the library's head traceable at
every shape, each restored afterwards (``export_patches``):
1. ``torch.sort`` / ``torch.argsort`` → ``torch.topk`` over the whole axis: the TorchScript exporter
   cannot export ``sort(stable=True)``; ONNX TopK breaks ties by the lower index, i.e. a stable sort.
2. the boundary encoder's BOS/EOS shifts, rewritten without in-place index writes (those bake the trace's
   batch size into a Reshape).
3. the proposer's ``export_mode`` "vectorized" (one block instead of data-dependent streaming).
The export verifies the graph with onnxruntime against the library at shapes other than the trace's
(a row shorter than ``start_top_k`` among them): the same valid candidates in the same order, and their
logits within ``TOLERANCE``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .export_onnx import _export, _ort

TOLERANCE = 1e-3
INPUTS = ["word_embs", "word_mask", "queries", "query_mask"]
OUTPUTS = ["cand_idx", "pair_logits", "cand_valid", "null_logits"]

# BoundaryHeadSettings that change the graph in ways not yet export-tested (research: boundary.md §B.2)
UNTESTED_SETTINGS = {
    "candidate_pool": lambda v: v != "per_query",
    "boundary_top_k_alpha": lambda v: float(v or 0) > 0,
    "boundary_attention_layers": lambda v: int(v or 0) > 0,
    "enable_rotary_endpoints": bool,
    "enable_span_content": bool,
    "endpoint_difference_features": bool,
    "query_conditioned_inside_weight": bool,
    "relation_biaffine_content": bool,
}


def _within_tolerance(graph: str, worst: float) -> None:
    """Raises unless the graph's largest difference from the library is within ``TOLERANCE``."""
    if worst > TOLERANCE:
        raise ValueError(f"{graph} differs from the library by {worst} (> {TOLERANCE})")


def unexportable_settings(settings: Any) -> list[str]:
    """The settings of a boundary head that this export refuses, as `name=value` (empty: exportable)."""
    return [
        f"{name}={getattr(settings, name)!r}"
        for name, refused in UNTESTED_SETTINGS.items()
        if hasattr(settings, name) and refused(getattr(settings, name))
    ]


def _topk_sort(x: torch.Tensor, dim: int = -1, descending: bool = False, stable: bool = False, **_: Any):
    dim = dim + x.dim() if dim < 0 else dim
    return torch.topk(x, x.shape[dim], dim=dim, largest=descending, sorted=True)


def _topk_argsort(x: torch.Tensor, dim: int = -1, descending: bool = False, stable: bool = False, **_: Any):
    return _topk_sort(x, dim=dim, descending=descending)[1]


def _shift_left_with_bos(text_states: torch.Tensor, bos_state: torch.Tensor) -> torch.Tensor:
    first = text_states[:, :1]
    return torch.cat([bos_state.to(text_states.dtype).view(1, 1, -1).expand_as(first), text_states], dim=1)


def _shift_right_with_eos(text_states: torch.Tensor, text_lengths: torch.Tensor, eos_state: torch.Tensor):
    length = text_states.shape[1]
    padded = torch.cat([text_states, torch.zeros_like(text_states[:, :1])], dim=1)
    position = torch.arange(length + 1, device=text_states.device).view(1, -1, 1)
    at_end = position == text_lengths.clamp(max=length).view(-1, 1, 1)
    return torch.where(at_end, eos_state.to(text_states.dtype).view(1, 1, -1), padded)


@contextlib.contextmanager
def export_patches(head: nn.Module) -> Iterator[None]:
    """The library's boundary head made traceable at every shape (module docstring); restored on exit."""
    from gliner2.models.boundary import encoding

    proposer = head.boundary_proposer
    saved = (torch.sort, torch.argsort, encoding.shift_left_with_bos, encoding.shift_right_with_eos, proposer.settings)
    torch.sort, torch.argsort = _topk_sort, _topk_argsort
    encoding.shift_left_with_bos, encoding.shift_right_with_eos = _shift_left_with_bos, _shift_right_with_eos
    proposer.settings = dataclasses.replace(proposer.settings, export_mode="vectorized")
    try:
        yield
    finally:
        torch.sort, torch.argsort, encoding.shift_left_with_bos, encoding.shift_right_with_eos = saved[:4]
        proposer.settings = saved[4]


class _Candidates(nn.Module):
    """word and query states → the head's scored candidates and abstention logits."""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head

    def forward(self, word_embs, word_mask, queries, query_mask):
        out = self.head(word_embs, word_mask.bool(), queries, query_mask.bool(), return_candidates=True)
        c = out.candidates
        return c.indices, c.pair_logits, c.valid_mask, out.null_logits


class _Explicit(nn.Module):
    """word and query states + given half-open spans per query → the head's pair logits for them
    (``score_explicit_spans``: how the library scores a choice field's options at their prefix words)."""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head

    def forward(self, word_embs, word_mask, queries, query_mask, span_idx, span_mask):
        return self.head.score_explicit_spans(
            word_embs, word_mask.bool(), queries, query_mask.bool(), span_idx, span_mask.bool()
        )


EXPLICIT_INPUTS = [*INPUTS, "span_idx", "span_mask"]


def _explicit_inputs(d: int, lengths: list[int], queries: list[int], spans: int, seed: int) -> tuple[torch.Tensor, ...]:
    """``_inputs`` plus ``spans`` one-word spans per query (the last one masked) inside each row."""
    word_embs, word_mask, qs, query_mask = _inputs(d, lengths, queries, seed)
    g = torch.Generator().manual_seed(seed + 100)
    b, q = len(lengths), max(queries)
    starts = torch.stack([torch.randint(0, n - 1, (q, spans), generator=g) for n in lengths])
    span_idx = torch.stack([starts, starts + 1], dim=-1)
    span_mask = torch.ones(b, q, spans, dtype=torch.long)
    span_mask[..., -1] = 0
    return word_embs, word_mask, qs, query_mask, span_idx, span_mask


def export_boundary_explicit(model: nn.Module, onnx_dir: Path, verify: bool = True) -> dict[str, float]:
    """Writes ``boundary_explicit.onnx``; returns the max |Δ logit| against the library on valid spans."""
    head = model.boundary_head.eval()
    d = int(model.encoder.config.hidden_size)
    path = onnx_dir / "boundary_explicit.onnx"
    wrapper = _Explicit(head).eval()
    dynamic = {name: {0: "batch", 1: "words" if name.startswith("word") else "queries"} for name in INPUTS}
    dynamic.update(
        {"span_idx": {0: "batch", 1: "queries", 2: "spans"}, "span_mask": {0: "batch", 1: "queries", 2: "spans"}}
    )
    dynamic["logits"] = {0: "batch", 1: "queries", 2: "spans"}
    with export_patches(head):
        _export(wrapper, _explicit_inputs(d, [30, 18], [2, 1], 3, seed=5), path, EXPLICIT_INPUTS, ["logits"], dynamic)
    if not verify:
        return {}
    session = _ort(path)
    worst = 0.0
    for lengths, queries, spans, seed in (([12], [3], 2, 6), ([25, 9, 14], [1, 2, 2], 4, 7)):
        args = _explicit_inputs(d, lengths, queries, spans, seed)
        got = session.run(None, {name: t.numpy() for name, t in zip(EXPLICIT_INPUTS, args)})[0]
        with torch.no_grad():
            ref = wrapper(*args).numpy()
        for b, nq in enumerate(queries):
            keep = args[5][b, :nq].numpy().astype(bool)
            worst = max(worst, float(np.abs(ref[b, :nq][keep] - got[b, :nq][keep]).max()))
    _within_tolerance("boundary_explicit.onnx", worst)
    return {"explicit_logits": worst}


def export_relation_mlp(model: nn.Module, onnx_dir: Path, verify: bool = True) -> dict[str, float]:
    """Writes ``relation_mlp.onnx``: the relation scorer's MLP over a pair's features (the host gathers them:
    four endpoint word states, the relation query, order and distance, relations.py ``SparseRelationScorer``)."""
    mlp = model.relation_scorer.mlp.eval()
    width = int(mlp[0].in_features)
    path = onnx_dir / "relation_mlp.onnx"
    g = torch.Generator().manual_seed(8)
    _export(
        mlp,
        (torch.randn(5, width, generator=g),),
        path,
        ["features"],
        ["logits"],
        {"features": {0: "pairs"}, "logits": {0: "pairs"}},
    )
    if not verify:
        return {}
    x = torch.randn(37, width, generator=g)
    with torch.no_grad():
        ref = mlp(x).numpy()
    worst = float(np.abs(ref - _ort(path).run(None, {"features": x.numpy()})[0]).max())
    _within_tolerance("relation_mlp.onnx", worst)
    return {"relation_logits": worst}


def _inputs(d: int, lengths: list[int], queries: list[int], seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    b, words, q = len(lengths), max(lengths), max(queries)
    word_mask = (torch.arange(words)[None] < torch.tensor(lengths)[:, None]).long()
    query_mask = (torch.arange(q)[None] < torch.tensor(queries)[:, None]).long()
    word_embs = torch.randn(b, words, d, generator=g) * word_mask[..., None]
    return word_embs, word_mask, torch.randn(b, q, d, generator=g), query_mask


def _compare(ref: tuple[torch.Tensor, ...], got: list[np.ndarray], queries: list[int]) -> dict[str, float]:
    """Raises unless every real query has the same valid candidates in the same order; returns the max diffs."""
    logit_diff = 0.0
    for b, nq in enumerate(queries):
        for q in range(nq):
            ref_valid, got_valid = ref[2][b, q].numpy(), got[2][b, q]
            want = [tuple(ix) for ix, v in zip(ref[0][b, q].tolist(), ref_valid) if v]
            have = [tuple(ix) for ix, v in zip(got[0][b, q].tolist(), got_valid) if v]
            if want != have:
                raise ValueError(f"boundary_candidates.onnx: row {b} query {q} candidates differ from the library's")
            ref_logits = ref[1][b, q].numpy()[ref_valid.astype(bool)]
            got_logits = got[1][b, q][got_valid.astype(bool)]
            if len(ref_logits):
                logit_diff = max(logit_diff, float(np.abs(ref_logits - got_logits).max()))
    null_diff = max(float(np.abs(ref[3][b, :nq].numpy() - got[3][b, :nq]).max()) for b, nq in enumerate(queries))
    return {"pair_logits": logit_diff, "null_logits": null_diff}


def export_boundary_candidates(model: nn.Module, onnx_dir: Path, verify: bool = True) -> dict[str, Any]:
    """Writes ``boundary_candidates.onnx`` for a boundary model; returns its candidate budget and parity diffs."""
    head = model.boundary_head.eval()
    refused = unexportable_settings(head.settings)
    if refused:
        raise ValueError(f"boundary head settings not supported by the export yet: {', '.join(refused)}")
    d = int(model.encoder.config.hidden_size)
    onnx_dir.mkdir(parents=True, exist_ok=True)
    path = onnx_dir / "boundary_candidates.onnx"
    wrapper = _Candidates(head).eval()
    t0 = time.time()
    dynamic = {name: {0: "batch", 1: "words" if name.startswith("word") else "queries"} for name in INPUTS}
    dynamic.update({name: {0: "batch", 1: "queries"} for name in OUTPUTS})
    with export_patches(head):
        _export(wrapper, _inputs(d, [40, 25], [3, 2], seed=1), path, INPUTS, OUTPUTS, dynamic)
    report: dict[str, Any] = {
        "candidate_budget": int(head.settings.candidate_budget),
        "export_seconds": round(time.time() - t0, 2),
        "parity_max_abs_diff": {},
    }
    if not verify:
        return report
    session = _ort(path)
    # other shapes than the trace's: more rows, longer and shorter texts, a text shorter than start_top_k
    shortest = max(2, int(head.settings.start_top_k) // 2)
    for lengths, queries, seed in (([60], [5], 2), ([20, 17, 16], [2, 2, 1], 3), ([shortest], [2], 4)):
        args = _inputs(d, lengths, queries, seed)
        got = session.run(None, {name: t.numpy() for name, t in zip(INPUTS, args)})
        with torch.no_grad():
            ref = wrapper(*args)
        for key, diff in _compare(ref, got, queries).items():
            report["parity_max_abs_diff"][key] = max(diff, report["parity_max_abs_diff"].get(key, 0.0))
    worst = max(report["parity_max_abs_diff"].values())
    _within_tolerance("boundary_candidates.onnx", worst)
    return report


#: the boundary model's served graphs beside its config (the span model's are export_onnx.py's)
BOUNDARY_FORMAT = "sift-gliner2-fragments/3"


def export_boundary_fragments(model, out_dir: Path, verify: bool = True, int8: bool = True) -> dict[str, Any]:
    """A boundary model (``AutoExtractor``, CPU, fp32) as the TS engine's fragments in ``out_dir/onnx``: the
    encoder and classifier graphs the span export writes, ``boundary_candidates.onnx``, and a config naming the
    architecture and the decoding settings the TS side applies (temperatures, abstention, overlap policy)."""
    from gliner2.inference.overlap import normalize_overlap_policy

    from .export_onnx import OPSET, encoder_parity, export_classifier, export_encoder, finish_with_int8, prompt_config

    t0 = time.time()
    onnx_dir = Path(out_dir) / "onnx"
    onnx_dir.mkdir(parents=True, exist_ok=True)
    model = model.float().cpu().eval()
    settings = model.boundary_head.settings
    if settings.adaptive_threshold:
        raise ValueError("boundary head settings not supported by the export yet: adaptive_threshold=True")
    d = int(model.encoder.config.hidden_size)
    encoder_graph = export_encoder(model, onnx_dir)
    export_classifier(model, onnx_dir, torch.randn(3, d, generator=torch.Generator().manual_seed(0)))
    candidates = export_boundary_candidates(model, onnx_dir, verify=verify)
    parity = {**candidates["parity_max_abs_diff"], **export_boundary_explicit(model, onnx_dir, verify=verify)}
    relations = bool(getattr(model, "enable_relations", False))
    if relations:
        parity.update(export_relation_mlp(model, onnx_dir, verify=verify))
    proposal = model.relation_pair_generator.settings if relations else None
    if verify:
        parity["encoder"] = encoder_parity(model, onnx_dir)
        labels = torch.randn(4, d, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            want = model.classifier(labels).numpy()
        parity["classifier"] = float(
            np.abs(want - _ort(onnx_dir / "classifier.onnx").run(None, {"label_embs": labels.numpy()})[0]).max()
        )
        if max(parity.values()) > TOLERANCE:
            raise ValueError(f"ONNX parity check failed: {parity}")
    # the word and query states both head graphs read (INPUTS)
    head_inputs = {
        "word_embs": ["batch", "words", d],
        "word_mask": ["batch", "words"],
        "queries": ["batch", "queries", d],
        "query_mask": ["batch", "queries"],
    }
    cfg = {
        "format": BOUNDARY_FORMAT,
        "encoder_graph": encoder_graph,
        "architecture": "boundary",
        "opset": OPSET,
        "hidden_size": d,
        "candidate_budget": candidates["candidate_budget"],
        "pair_temperature": float(settings.pair_temperature),
        "classification_temperature": float(settings.classification_temperature),
        "enable_abstention": bool(settings.enable_abstention),
        "abstention_threshold": float(settings.abstention_threshold),
        "overlap_policy": normalize_overlap_policy(None, default=settings.overlap_policy),
        "enable_relations": relations,
        **(
            {
                "relation_temperature": float(settings.relation_temperature),
                "relation_heads_per_type": int(proposal.heads_per_relation),
                "relation_tails_per_type": int(proposal.tails_per_relation),
                "relation_pair_cap": int(proposal.pair_cap),
                "relation_argument_threshold": float(proposal.argument_threshold),
                "directional_relation_states": bool(settings.directional_relation_states),
            }
            if relations
            else {}
        ),
        **prompt_config(model),
        "files": {
            "encoder": {
                "file": "encoder.onnx",
                "inputs": {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "seq"]},
                "outputs": {"hidden": ["batch", "seq", d]},
            },
            "classifier": {
                "file": "classifier.onnx",
                "inputs": {"label_embs": ["labels", d]},
                "outputs": {"logits": ["labels", 1]},
            },
            "boundary_explicit": {
                "file": "boundary_explicit.onnx",
                "inputs": {
                    **head_inputs,
                    "span_idx": ["batch", "queries", "spans", 2],
                    "span_mask": ["batch", "queries", "spans"],
                },
                "outputs": {"logits": ["batch", "queries", "spans"]},
            },
            **(
                {
                    "relation_mlp": {
                        "file": "relation_mlp.onnx",
                        "inputs": {"features": ["pairs", int(model.relation_scorer.mlp[0].in_features)]},
                        "outputs": {"logits": ["pairs", 1]},
                    }
                }
                if relations
                else {}
            ),
            "boundary_candidates": {
                "file": "boundary_candidates.onnx",
                "inputs": head_inputs,
                "outputs": {
                    "cand_idx": ["batch", "queries", candidates["candidate_budget"], 2],
                    "pair_logits": ["batch", "queries", candidates["candidate_budget"]],
                    "cand_valid": ["batch", "queries", candidates["candidate_budget"]],
                    "null_logits": ["batch", "queries"],
                },
            },
        },
        "parity_max_abs_diff": parity,
    }
    with open(onnx_dir / "gliner2_config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    return finish_with_int8(Path(out_dir), int8, t0)
