"""The export-only DeBERTa disentangled-attention rewrite (sift_trainer/export/deberta_attention.py) equals
transformers' module: the bias alone and the whole encoder on padded batches, at lengths below the log
buckets, past them (S > 128 here: position_buckets 256 → mid 128) and past the bucket table (S > 256),
with shared and separate position projections."""

from __future__ import annotations

import pytest
import torch

LENGTHS = (1, 5, 60, 129, 200, 300)


def _model(share_att_key: bool, pos_att_type=("p2c", "c2p")):
    from transformers import DebertaV2Config, DebertaV2Model

    torch.manual_seed(0)
    cfg = DebertaV2Config(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=512,
        relative_attention=True,
        position_buckets=256,
        max_relative_positions=-1,
        norm_rel_ebd="layer_norm",
        share_att_key=share_att_key,
        pos_att_type=list(pos_att_type),
        position_biased_input=False,
        type_vocab_size=0,
    )
    cfg._attn_implementation = "eager"
    m = DebertaV2Model(cfg).eval()
    with torch.no_grad():  # larger than the 0.02 init, so the relative-position bias moves the output visibly
        for name, p in m.named_parameters():
            if name.endswith("proj.weight"):
                p.normal_(0, 0.3)
    return m


@pytest.mark.parametrize("share_att_key", [True, False])
def test_bias_equals_transformers(share_att_key):
    """The bias tensor itself, element for element: a wrong column slice or index shift changes it by O(1)."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention, build_relative_position

    from sift_trainer.export.deberta_attention import disentangled_attention_bias

    m = _model(share_att_key)
    att = m.encoder.layer[0].attention.self
    rel_emb = m.encoder.get_rel_embedding()
    g = torch.Generator().manual_seed(1)
    for S in LENGTHS:
        q = torch.randn(2 * att.num_attention_heads, S, 8, generator=g)
        k = torch.randn(2 * att.num_attention_heads, S, 8, generator=g)
        rel = build_relative_position(q, k, bucket_size=att.position_buckets, max_position=att.max_relative_positions)
        with torch.no_grad():
            want = DisentangledSelfAttention.disentangled_attention_bias(att, q, k, rel, rel_emb, 3)
            got = disentangled_attention_bias(att, q, k, rel, rel_emb, 3)
        assert got.shape == want.shape == (2 * att.num_attention_heads, S, S)
        assert (
            S == 1 or (want[..., 1:] - want[..., :-1]).abs().max() > 0.5
        )  # a shifted column would not show on a flat bias
        assert torch.allclose(got, want, atol=1e-5, rtol=0), (S, (got - want).abs().max())


@pytest.mark.parametrize(
    "share_att_key,pos_att_type", [(True, ("p2c", "c2p")), (False, ("p2c", "c2p")), (True, ("c2p",))]
)
def test_encoder_equals_transformers_on_padded_batches(share_att_key, pos_att_type):
    from sift_trainer.export.deberta_attention import fast_disentangled_attention

    m = _model(share_att_key, pos_att_type)
    g = torch.Generator().manual_seed(2)
    for S in LENGTHS:
        ids = torch.randint(0, 64, (3, S), generator=g)
        mask = torch.ones_like(ids)
        mask[1, S // 2 + 1 :] = 0
        mask[2, max(1, S - 3) :] = 0
        with torch.no_grad():
            want = m(input_ids=ids, attention_mask=mask).last_hidden_state
            with fast_disentangled_attention(m) as n:
                got = m(input_ids=ids, attention_mask=mask).last_hidden_state
            after = m(input_ids=ids, attention_mask=mask).last_hidden_state
        assert n == 2
        assert torch.allclose(got, want, atol=1e-5, rtol=0), (S, (got - want).abs().max())
        assert torch.equal(after, want)  # the original method is back after the block
