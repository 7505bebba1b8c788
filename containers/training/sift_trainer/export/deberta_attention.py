"""An export-only rewrite of DeBERTa-v2/v3's disentangled attention bias (issue #27 item 4).

transformers' ``DisentangledSelfAttention.disentangled_attention_bias`` scores every query (c2p) and
every key (p2c) against all ``2 × pos_ebd_size`` relative-position embeddings (512 for DeBERTa-v3:
256 log buckets each way), after ``.repeat``-ing the projected embeddings once per batch row (an ONNX
``Tile``), then gathers the S columns each row uses. A sequence of S tokens only has relative distances
±(S-1), which bucket into ``[-b(S-1), b(S-1)]``: at S = 60 that is 119 of the 512 columns. The rewrite

- projects the relative embeddings exactly as the original (constants after export folding),
- keeps only the bucket columns the sequence can index (a ``Gather`` of rows ``lo..hi``, where ``lo``/``hi``
  are the smallest/largest clamped index in ``relative_pos``: computed in the graph, so the export stays
  dynamic in the sequence length),
- multiplies with broadcasting (``[B, H, S, d] @ [H, K, d]ᵀ``) instead of tiling per batch row,
- gathers from that smaller score tensor with the index shifted by ``lo``.

Same parameters and the same arithmetic per kept element (only fewer columns are computed), so the
output equals the original up to float rounding (tests/test_deberta_attention.py). Applied only while
exporting (``patch``/``unpatch`` in export_onnx.py's ``_export_encoder_eager``, for ``model_type`` deberta-v2), so training and the PyTorch reference are untouched.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import torch
from torch import nn


def _scale(d: int, scale_factor: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.sqrt(torch.tensor(d, dtype=torch.float) * scale_factor).to(dtype=dtype)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[P, H*d] → [H, P, d] (the projected relative embeddings per head: rows are buckets, gathered contiguously)."""
    return x.view(x.size(0), heads, -1).transpose(0, 1)


def disentangled_attention_bias(self, query_layer, key_layer, relative_pos, rel_embeddings, scale_factor):
    """Drop-in for ``DisentangledSelfAttention.disentangled_attention_bias`` (self-attention only)."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    if relative_pos is None:
        relative_pos = build_relative_position(
            query_layer, key_layer, bucket_size=self.position_buckets, max_position=self.max_relative_positions
        )
    if query_layer.size(-2) != key_layer.size(-2):
        raise ValueError("fast disentangled attention: query and key lengths differ (not self-attention)")
    if relative_pos.dim() not in (2, 3, 4):
        raise ValueError(f"Relative position ids must be of dim 2 or 3 or 4. {relative_pos.dim()}")
    rel = relative_pos.to(device=query_layer.device, dtype=torch.long)
    rel = rel.reshape(rel.size(-2), rel.size(-1))  # [S, S], the same for every row and head
    H = self.num_attention_heads
    S = query_layer.size(-2)
    d = query_layer.size(-1)
    att_span = self.pos_ebd_size
    emb = rel_embeddings[0 : att_span * 2, :]
    use_c2p = "c2p" in self.pos_att_type
    use_p2c = "p2c" in self.pos_att_type

    c2p_pos = torch.clamp(rel + att_span, 0, att_span * 2 - 1)
    p2c_pos = torch.clamp(-rel + att_span, 0, att_span * 2 - 1)
    lo = torch.minimum(c2p_pos.min(), p2c_pos.min())
    hi = torch.maximum(c2p_pos.max(), p2c_pos.max())
    cols = torch.arange(lo, hi + 1, device=query_layer.device)  # the bucket columns the sequence uses

    q4 = query_layer.view(-1, H, S, d)
    k4 = key_layer.view(-1, H, S, d)
    index_shape = [q4.size(0), H, S, S]
    score = 0
    if use_c2p:
        proj = self.key_proj if self.share_att_key else self.pos_key_proj
        pos_key = torch.index_select(_heads(proj(emb), H), 1, cols)  # [H, K, d]
        c2p = torch.matmul(q4, pos_key.transpose(-1, -2))  # [B, H, S, K]
        c2p = torch.gather(c2p, -1, (c2p_pos - lo).expand(index_shape))
        score = score + c2p / _scale(self.attention_head_size, scale_factor, c2p.dtype)
    if use_p2c:
        proj = self.query_proj if self.share_att_key else self.pos_query_proj
        pos_query = torch.index_select(_heads(proj(emb), H), 1, cols)
        p2c = torch.matmul(k4, pos_query.transpose(-1, -2))
        p2c = torch.gather(p2c, -1, (p2c_pos - lo).expand(index_shape)).transpose(-1, -2)
        score = score + p2c / _scale(self.attention_head_size, scale_factor, p2c.dtype)
    if isinstance(score, int):
        return score
    return score.reshape(-1, S, S)


def _attention_modules(model: nn.Module) -> list[nn.Module]:
    from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

    return [m for m in model.modules() if isinstance(m, DisentangledSelfAttention) and m.relative_attention]


def patch(model: nn.Module) -> int:
    """Every DeBERTa-v2 self-attention of ``model`` uses the sliced bias from now on; returns how many."""
    mods = _attention_modules(model)
    for m in mods:
        m.disentangled_attention_bias = types.MethodType(disentangled_attention_bias, m)
    return len(mods)


def unpatch(model: nn.Module) -> None:
    """Undoes ``patch`` (a no-op on modules it did not patch)."""
    for m in _attention_modules(model):
        m.__dict__.pop("disentangled_attention_bias", None)


@contextlib.contextmanager
def fast_disentangled_attention(model: nn.Module) -> Iterator[int]:
    """Within the block, every DeBERTa-v2 self-attention of ``model`` uses the sliced bias; yields how many."""
    n = patch(model)
    try:
        yield n
    finally:
        unpatch(model)
