"""ONNX export of a GLiNER2 span model as fragments (research/gliner2.md §5.2).

Graphs written to ``<out>/onnx/``:

| file               | inputs                                                   | outputs                          |
|--------------------|----------------------------------------------------------|----------------------------------|
| encoder.onnx       | input_ids int64 [batch, seq], attention_mask int64 [batch, seq] | hidden f32 [batch, seq, D]   |
| span_rep.onnx      | word_embs f32 [batch, words, D], span_idx int64 [batch, words*W, 2] | span_rep f32 [batch, words, W, D] |
| count_pred.onnx    | p_emb f32 [schemas, D]                                   | count_logits f32 [schemas, 20]   |
| count_embed.onnx   | field_embs f32 [fields, D]                               | struct_proj f32 [20, fields, D]  |
| classifier.onnx    | label_embs f32 [labels, D]                               | logits f32 [labels, 1]           |
| span_scores.onnx, count_embed_c1.onnx | see export_scorer.py (what the TS engine scores spans with) | |
| encoder.int8.onnx  | as encoder.onnx, dynamic int8 MatMul weights (quantize_onnx.py) | |

The encoder is exported with eager attention (matmul → scale → add mask → softmax): the SDPA export of
transformers 5 adds IsNaN/Where guards per layer that cost ~6% at batch 32 and block ONNX Runtime's
graph optimizations; the step checks one Softmax per layer and no IsNaN so a transformers upgrade that
changes the pattern fails the export instead of silently serving a slower graph.

plus ``gliner2_config.json`` (max_width, hidden_size, counting_layer, max_count, special-token ids,
word regex, append_period, parity diffs). Every graph is checked against PyTorch with onnxruntime.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

OPSET = 17
MAX_COUNT = 20
FORMAT = (
    "sift-gliner2-fragments/2"  # /2: eager-attention encoder, span_scores.onnx, count_embed_c1.onnx, encoder.int8.onnx
)


def relative_positions(encoder_config: Any) -> bool:
    """Whether the backbone has relative attention and no absolute position embeddings (DeBERTa-v2/v3 with
    ``position_biased_input: false``): then ``max_position_embeddings`` is no hard limit on the input and
    the serving engine may window past it when ``window_tokens`` asks (src/encoder/windows.ts ``windowPlan``).
    BERT-style absolute embeddings (and anything unknown) are False: the engine keeps to max_position_embeddings."""
    return bool(getattr(encoder_config, "relative_attention", False)) and (
        getattr(encoder_config, "position_biased_input", True) is False
    )


SPECIAL_TOKENS = [
    "[SEP_STRUCT]",
    "[SEP_TEXT]",
    "[P]",
    "[C]",
    "[E]",
    "[R]",
    "[L]",
    "[EXAMPLE]",
    "[OUTPUT]",
    "[DESCRIPTION]",
]
# gliner2 2.1.0 gliner2/processing/word_splitter.py WhitespaceTokenSplitter (re.VERBOSE | re.IGNORECASE);
# WORD = [\w + every Unicode combining mark (category M) + U+200C + U+200D]
WORD_REGEX = r"(?:https?://[^\s]+|www\.[^\s]+)|[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}|@[a-z0-9_]+|WORD+(?:[-_]WORD+)*|\S"
WORD_CLASS_JS = r"[\p{L}\p{N}\p{M}_\u200c\u200d]"
WORD_REGEX_JS = (
    r"(?:https?:\/\/[^\s]+|www\.[^\s]+)|[a-z0-9._%+\-]+@[a-z0-9.\-]+\.[a-z]{2,}|@[a-z0-9_]+|"
    + WORD_CLASS_JS
    + "+(?:[\\-_]"
    + WORD_CLASS_JS
    + "+)*|\\S"
)


class _Encoder(nn.Module):
    def __init__(self, enc: nn.Module):
        super().__init__()
        self.enc = enc

    def forward(self, input_ids, attention_mask):
        return self.enc(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class _SpanRep(nn.Module):
    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, word_embs, span_idx):
        return self.layer(word_embs, span_idx)


class _EncoderLayer(nn.Module):
    """``nn.TransformerEncoderLayer``'s eval-mode math (post-norm or pre-norm, batch_first) written so it
    traces with a dynamic sequence length. The stock layer does not export: under no_grad + eval it
    takes PyTorch's fused fast path (``aten::_transformer_encoder_layer_fwd``, no ONNX symbolic), and
    with the fast path off its attention reshapes bake the traced sequence length into the graph."""

    def __init__(self, layer: nn.TransformerEncoderLayer):
        super().__init__()
        attn = layer.self_attn
        if not attn.batch_first or not attn._qkv_same_embed_dim:
            raise RuntimeError("count_embed export: expected a batch_first self-attention with one in_proj")
        self.heads = attn.num_heads
        self.in_proj = nn.Linear(attn.embed_dim, 3 * attn.embed_dim)
        self.in_proj.weight, self.in_proj.bias = attn.in_proj_weight, attn.in_proj_bias
        self.out_proj = attn.out_proj
        self.linear1, self.linear2 = layer.linear1, layer.linear2
        self.norm1, self.norm2 = layer.norm1, layer.norm2
        self.norm_first = layer.norm_first
        self.activation = layer.activation

    def _sa(self, x):
        B, E, H = x.shape[0], x.shape[2], self.heads
        q, k, v = self.in_proj(x).reshape(B, -1, 3, H, E // H).permute(2, 0, 3, 1, 4)  # 3 × [B, H, S, d]
        att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(E // H), dim=-1)
        return self.out_proj((att @ v).transpose(1, 2).reshape(B, -1, E))

    def _ff(self, x):
        return self.linear2(self.activation(self.linear1(x)))

    def forward(self, x):
        if self.norm_first:
            x = x + self._sa(self.norm1(x))
            return x + self._ff(self.norm2(x))
        x = self.norm1(x + self._sa(x))
        return self.norm2(x + self._ff(x))


def exportable_count_embed(ce: nn.Module) -> nn.Module:
    """``ce`` itself, or for CountLSTMv2 (``count_lstm_v2``, fastino/gliner2-base-v1's counting layer) a
    copy whose transformer layers are ``_EncoderLayer`` rewrites sharing the same weights. Parity with
    the library's own module (fast path and all) is checked after the export."""
    inner = getattr(getattr(ce, "transformer", None), "transformer", None)
    if not isinstance(inner, nn.TransformerEncoder):
        return ce
    ce = copy.copy(ce)  # shallow: the copy's other submodules are the model's own
    ce._modules = dict(ce._modules)
    tr = copy.copy(ce.transformer)
    tr._modules = dict(tr._modules)
    layers = [_EncoderLayer(m) for m in inner.layers]
    if inner.norm is not None:
        layers.append(inner.norm)
    tr.transformer = nn.Sequential(*layers)
    ce.transformer = tr
    return ce.eval()


class _CountEmbed(nn.Module):
    def __init__(self, ce: nn.Module):
        super().__init__()
        self.ce = exportable_count_embed(ce)

    def forward(self, field_embs):
        return self.ce(field_embs, MAX_COUNT)


class _MLP(nn.Module):
    def __init__(self, m: nn.Module):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)


def _export(module: nn.Module, args, path: Path, input_names, output_names, dynamic_axes) -> None:
    module.eval()
    with torch.no_grad():
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def _ort(path: Path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _maxdiff(a: torch.Tensor, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.detach().cpu().numpy() - b))) if b.size else 0.0


def _span_idx(L: int, W: int) -> torch.Tensor:
    starts = torch.arange(L).unsqueeze(1).expand(L, W)
    ends = starts + torch.arange(W).unsqueeze(0)
    valid = ends < L
    s = torch.where(valid, starts, torch.zeros_like(starts)).reshape(-1)
    e = torch.where(valid, ends, torch.zeros_like(ends)).reshape(-1)
    return torch.stack([s, e], dim=-1).unsqueeze(0)


def _export_encoder_eager(enc: nn.Module, ids, mask, path: Path) -> dict[str, Any]:
    """Exports ``enc`` with eager attention and checks the graph has the eager pattern (see module doc)."""
    import onnx

    from . import deberta_attention

    cfg = enc.config
    before = getattr(cfg, "_attn_implementation", None)
    cfg._attn_implementation = "eager"
    sliced = deberta_attention.patch(enc) if getattr(cfg, "model_type", "") == "deberta-v2" else 0  # see that module
    try:
        _export(
            _Encoder(enc),
            (ids, mask),
            path,
            ["input_ids", "attention_mask"],
            ["hidden"],
            {
                "input_ids": {0: "batch", 1: "seq"},
                "attention_mask": {0: "batch", 1: "seq"},
                "hidden": {0: "batch", 1: "seq"},
            },
        )
    finally:
        cfg._attn_implementation = before
        deberta_attention.unpatch(enc)
    ops = [n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node]
    layers = int(getattr(cfg, "num_hidden_layers", 0))
    softmax, isnan = ops.count("Softmax"), ops.count("IsNaN")
    # checked for the backbones of the served models: BERT (the mini model) and DeBERTa-v2/v3 (the
    # released GLiNER2 models; its disentangled attention also has one Softmax per layer when eager)
    if getattr(cfg, "model_type", "") in ("bert", "deberta-v2") and (softmax != layers or isnan):
        raise RuntimeError(
            f"encoder export: expected eager attention ({layers} Softmax, no IsNaN), got {softmax} Softmax and {isnan} IsNaN"
        )
    rel = {"relative_attention": f"bucket columns sliced to the sequence ({sliced} layers)"} if sliced else {}
    return {"attention": "eager", "softmax_nodes": softmax, "layers": layers, **rel}


def export_encoder(model, onnx_dir: Path) -> dict[str, Any]:
    """``encoder.onnx``, traced on a one-row prompt (any architecture: the encoder and its prompt are shared)."""
    tok = model.processor.tokenizer
    ids = torch.tensor(
        [tok.convert_tokens_to_ids(tok.tokenize("( [P] entities ( [E] person ) ) [SEP_TEXT] tim cook leads apple ."))],
        dtype=torch.long,
    )
    return _export_encoder_eager(model.encoder, ids, torch.ones_like(ids), onnx_dir / "encoder.onnx")


def export_classifier(model, onnx_dir: Path, example: torch.Tensor) -> None:
    """``classifier.onnx``: the ``[L]`` label-token classifier (the same module in span and boundary models)."""
    _export(
        _MLP(model.classifier),
        (example,),
        onnx_dir / "classifier.onnx",
        ["label_embs"],
        ["logits"],
        {"label_embs": {0: "labels"}, "logits": {0: "labels"}},
    )


def encoder_parity(model, onnx_dir: Path) -> float:
    """Max |onnxruntime − PyTorch| of ``encoder.onnx`` on a padded batch of 2 at another length than the trace."""
    tok = model.processor.tokenizer
    text = "( [P] company ( [E] company [E] city ) ) [SEP_TEXT] acme corp opened an office in paris ."
    ids2 = tok.convert_tokens_to_ids(tok.tokenize(text))
    b = torch.zeros(2, len(ids2), dtype=torch.long)
    m = torch.zeros_like(b)
    b[0] = torch.tensor(ids2)
    m[0] = 1
    b[1, :5] = torch.tensor(ids2[:5])
    m[1, :5] = 1
    with torch.no_grad():
        ref = model.encoder(input_ids=b, attention_mask=m).last_hidden_state
    got = _ort(onnx_dir / "encoder.onnx").run(None, {"input_ids": b.numpy(), "attention_mask": m.numpy()})[0]
    return max(_maxdiff(ref[0], got[0]), _maxdiff(ref[1, :5], got[1, :5]))


#: the fragment config's keys a model's manifest repeats under ``onnx`` (span: width and count; boundary: budget)
MANIFEST_ONNX_KEYS = (
    "format",
    "hidden_size",
    "max_width",
    "max_count",
    "candidate_budget",
    "opset",
    "parity_max_abs_diff",
)


def manifest_onnx(onnx_cfg: dict[str, Any]) -> dict[str, Any]:
    """The ``onnx`` block of a model's manifest.json from its fragment config (import and training alike)."""
    return {k: onnx_cfg[k] for k in MANIFEST_ONNX_KEYS if k in onnx_cfg}


def prompt_config(model) -> dict[str, Any]:
    """The fragment config's keys that any architecture's TS engine needs to build and split a prompt as gliner2 does."""
    tok = model.processor.tokenizer
    return {
        "token_pooling": model.config.token_pooling,
        "max_position_embeddings": int(getattr(model.encoder.config, "max_position_embeddings", 512)),
        "relative_positions": relative_positions(model.encoder.config),
        "vocab_size": len(tok),
        "pad_token_id": int(tok.pad_token_id or 0),
        "special_tokens": {t: int(tok.convert_tokens_to_ids(t)) for t in SPECIAL_TOKENS},
        "add_cls_sep": False,
        "lowercase_words": True,
        "append_period": True,
        "word_regex": WORD_REGEX,
        "word_regex_flags": "IGNORECASE",
        "word_regex_word_class": "[\\w, Unicode category M, U+200C, U+200D]",
        "word_regex_js": WORD_REGEX_JS,
        "word_regex_js_flags": "giu",
        "offsets": "unicode code points into the original text; words are lowercased after matching",
    }


def export_fragments(model, out_dir: Path, verify: bool = True, int8: bool = True) -> dict[str, Any]:
    """Export ``model`` (a merged span GLiNER2 model on CPU, fp32) into ``out_dir/onnx``."""
    t0 = time.time()
    onnx_dir = Path(out_dir) / "onnx"
    onnx_dir.mkdir(parents=True, exist_ok=True)
    model = model.float().cpu().eval()
    D = int(model.hidden_size)
    W = int(model.max_width)
    g = torch.Generator().manual_seed(0)

    encoder_graph = export_encoder(model, onnx_dir)
    L = 6
    we = torch.randn(1, L, D, generator=g)
    _export(
        _SpanRep(model.span_rep.span_rep_layer),
        (we, _span_idx(L, W)),
        onnx_dir / "span_rep.onnx",
        ["word_embs", "span_idx"],
        ["span_rep"],
        {
            "word_embs": {0: "batch", 1: "words"},
            "span_idx": {0: "batch", 1: "spans"},
            "span_rep": {0: "batch", 1: "words"},
        },
    )
    _export(
        _MLP(model.count_pred),
        (torch.randn(2, D, generator=g),),
        onnx_dir / "count_pred.onnx",
        ["p_emb"],
        ["count_logits"],
        {"p_emb": {0: "schemas"}, "count_logits": {0: "schemas"}},
    )
    _export(
        _CountEmbed(model.count_embed),
        (torch.randn(3, D, generator=g),),
        onnx_dir / "count_embed.onnx",
        ["field_embs"],
        ["struct_proj"],
        {"field_embs": {0: "fields"}, "struct_proj": {1: "fields"}},
    )
    export_classifier(model, onnx_dir, torch.randn(3, D, generator=g))

    parity: dict[str, float] = {}
    if verify:
        with torch.no_grad():
            parity["encoder"] = encoder_parity(model, onnx_dir)
            L2 = 11
            we2 = torch.randn(1, L2, D, generator=g)
            si = _span_idx(L2, W)
            ref = model.span_rep.span_rep_layer(we2, si)
            got = _ort(onnx_dir / "span_rep.onnx").run(None, {"word_embs": we2.numpy(), "span_idx": si.numpy()})[0]
            parity["span_rep"] = _maxdiff(ref, got)
            # direct-scoring path used by gliner2 at inference == span_rep . struct_proj
            p5 = torch.randn(5, D, generator=g)
            ref = model.count_pred(p5)
            got = _ort(onnx_dir / "count_pred.onnx").run(None, {"p_emb": p5.numpy()})[0]
            parity["count_pred"] = _maxdiff(ref, got)
            f4 = torch.randn(4, D, generator=g)
            ref = model.count_embed(f4, MAX_COUNT)
            got = _ort(onnx_dir / "count_embed.onnx").run(None, {"field_embs": f4.numpy()})[0]
            parity["count_embed"] = _maxdiff(ref, got)
            # slicing the 20 unrolled steps == running with count C
            ref3 = model.count_embed(f4, 3)
            parity["count_embed_slice3"] = _maxdiff(ref3, got[:3])
            ref = model.classifier(f4)
            got = _ort(onnx_dir / "classifier.onnx").run(None, {"label_embs": f4.numpy()})[0]
            parity["classifier"] = _maxdiff(ref, got)
            # factorized scorer used by gliner2 2.x == dot(span_rep, query)
            q = model.count_embed(f4, 2).reshape(-1, D).unsqueeze(0)
            direct = model.span_rep.score_queries(we2, q, mask_invalid=False)[0]  # [Q, L, W]
            sr = model.span_rep.span_rep_layer(we2, si)[0]  # [L, W, D]
            via_rep = torch.einsum("lwd,qd->qlw", sr, q[0])
            valid = (torch.arange(L2).unsqueeze(1) + torch.arange(W).unsqueeze(0)) < L2
            parity["scorer_equivalence"] = float((direct - via_rep)[:, valid].abs().max())
        worst = max(parity.values())
        if worst > 1e-3:
            raise RuntimeError(f"ONNX parity check failed: {parity}")

    cfg = {
        "format": FORMAT,
        "encoder_graph": encoder_graph,
        "architecture": "span",
        "opset": OPSET,
        "hidden_size": D,
        "max_width": W,
        "max_count": MAX_COUNT,
        "counting_layer": model.config.counting_layer,
        **prompt_config(model),
        "files": {
            "encoder": {
                "file": "encoder.onnx",
                "inputs": {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "seq"]},
                "outputs": {"hidden": ["batch", "seq", D]},
            },
            "span_rep": {
                "file": "span_rep.onnx",
                "inputs": {"word_embs": ["batch", "words", D], "span_idx": ["batch", f"words*{W}", 2]},
                "outputs": {"span_rep": ["batch", "words", W, D]},
            },
            "count_pred": {
                "file": "count_pred.onnx",
                "inputs": {"p_emb": ["schemas", D]},
                "outputs": {"count_logits": ["schemas", MAX_COUNT]},
            },
            "count_embed": {
                "file": "count_embed.onnx",
                "inputs": {"field_embs": ["fields", D]},
                "outputs": {"struct_proj": [MAX_COUNT, "fields", D]},
            },
            "classifier": {
                "file": "classifier.onnx",
                "inputs": {"label_embs": ["labels", D]},
                "outputs": {"logits": ["labels", 1]},
            },
        },
        "parity_max_abs_diff": parity,
        "export_seconds": round(time.time() - t0, 2),
    }
    with open(onnx_dir / "gliner2_config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    # the serving graphs: span scoring in one graph (verified against span_rep), and the int8 encoder
    from .export_scorer import export_scorer

    export_scorer(model, Path(out_dir))
    return finish_with_int8(Path(out_dir), int8, t0)


def finish_with_int8(out_dir: Path, int8: bool, t0: float) -> dict[str, Any]:
    """The int8 encoder beside the written fp32 fragments (a failure is recorded, not raised: the service serves
    fp32 without the file), and the config's total export time; returns the final config."""
    from .quantize_onnx import quantize

    onnx_dir = out_dir / "onnx"
    int8_error = None
    if int8:
        try:
            quantize(out_dir)
        except Exception as e:  # noqa: BLE001 - the fp32 export stands
            int8_error = f"{type(e).__name__}: {e}"[:500]
            (onnx_dir / "encoder.int8.onnx").unlink(missing_ok=True)
    cfg = json.loads((onnx_dir / "gliner2_config.json").read_text())
    if int8_error:
        cfg.setdefault("files", {})["encoder_int8"] = {"error": int8_error}
    cfg["export_seconds"] = round(time.time() - t0, 2)
    with open(onnx_dir / "gliner2_config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    return cfg
