"""``relative_positions`` in gliner2_config.json: what lets the serving engine window a DeBERTa-v3 backbone past
max_position_embeddings (src/encoder/windows.ts ``windowPlan``; docs/reference/encoder.md "Long texts")."""

from __future__ import annotations

from transformers import BertConfig, DebertaV2Config

from sift_trainer.export.export_onnx import relative_positions


def test_deberta_v3_is_relative_bert_is_not():
    # DeBERTa-v3-base/large and mDeBERTa-v3-base ship relative_attention: true, position_biased_input: false
    assert relative_positions(DebertaV2Config(relative_attention=True, position_biased_input=False)) is True
    # DeBERTa-v2 with absolute embeddings added to the input, and BERT: max_position_embeddings is a hard limit
    assert relative_positions(DebertaV2Config(relative_attention=True, position_biased_input=True)) is False
    assert relative_positions(DebertaV2Config()) is False
    assert relative_positions(BertConfig()) is False
