"""The released GLiNER2 architectures (issue #27), each on a tiny random-initialised checkpoint built
offline at its real config shape (sift_trainer.build.architectures): imported and exported with
parity, the boundary architecture exported (and its untested settings refused by name), LoRA targets
resolved on DeBERTa.

One checkpoint per architecture, built and converted once per session (~30 s in all on 2 cores,
most of it the 250k-piece mDeBERTa vocabulary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SERVED_FILES

from sift_trainer.build import architectures
from sift_trainer.export.import_checkpoint import CheckpointError, check_checkpoint

SERVED = ("deberta-v3-count_lstm", "deberta-v3-count_lstm_v2", "mdeberta-v3")
CASE = {
    "name": "entities",
    "threshold": 0.0,
    "texts": ["Tim Cook leads Apple in Cupertino."],
    "schema": {"entities": [{"name": "person"}], "classifications": [], "structures": [], "relations": []},
}


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("architectures")
    return {a: Path(architectures.build(a, root / a)["out"]) for a in architectures.ARCHS}


@pytest.fixture(scope="session")
def converted(checkpoints, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    from sift_trainer.export.import_checkpoint import convert

    root = tmp_path_factory.mktemp("converted")
    return {a: (root / a, convert(checkpoints[a], root / a, "fastino/gliner2-base-v1", [CASE])) for a in SERVED}


def test_checkpoints_have_the_released_layout_and_config_shape(checkpoints):
    for arch in architectures.ARCHS:
        ckpt = checkpoints[arch]
        for f in ("config.json", "encoder_config/config.json", "model.safetensors", "tokenizer.json"):
            assert (ckpt / f).is_file(), (arch, f)
        cfg = json.loads((ckpt / "config.json").read_text())
        enc = json.loads((ckpt / "encoder_config" / "config.json").read_text())
        assert cfg["architecture"] == ("boundary" if arch == "boundary" else "span")
        if arch != "boundary":
            assert cfg["counting_layer"] == architectures.COUNTING[arch]
        # microsoft/deberta-v3-*'s disentangled attention, as the released backbones have it
        assert enc["model_type"] == "deberta-v2"
        assert enc["relative_attention"] is True and enc["position_biased_input"] is False
        assert enc["pos_att_type"] == ["p2c", "c2p"] and enc["position_buckets"] == 256
        assert enc["norm_rel_ebd"] == "layer_norm" and enc["share_att_key"] is True
        tok = json.loads((ckpt / "tokenizer.json").read_text())
        assert tok["model"]["type"] == "Unigram"
        assert [t["content"] for t in tok["added_tokens"]][:4] == ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
        pre = json.dumps(tok["pre_tokenizer"], ensure_ascii=False)
        assert "Metaspace" in pre and "\u2581" in pre


def test_the_multilingual_vocabulary_is_real_size(converted):
    from tokenizers import Tokenizer

    # the tokenizer.json the TS engine loads: 250,000 SentencePiece pieces + [MASK] + gliner2's 10 special tokens
    tok = Tokenizer.from_file(str(converted["mdeberta-v3"][0] / "tokenizer.json"))
    assert tok.get_vocab_size(with_added_tokens=True) == architectures.MULTI_VOCAB + 1 + 10
    pieces = tok.encode("Москва, 東京 and München", add_special_tokens=False).tokens
    assert "[UNK]" not in pieces and pieces[0].startswith("\u2581")


def test_the_build_is_deterministic(tmp_path):
    from sift_trainer.build.build_mini import weights_digest

    a = architectures.build("deberta-v3-count_lstm_v2", tmp_path / "a")
    b = architectures.build("deberta-v3-count_lstm_v2", tmp_path / "b")
    assert a["files"] == b["files"]
    assert weights_digest(tmp_path / "a" / "model.safetensors") == weights_digest(tmp_path / "b" / "model.safetensors")
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tmp_path / "b" / "tokenizer.json").read_bytes()


@pytest.mark.parametrize("arch", SERVED)
def test_each_released_architecture_converts_with_parity(converted, arch):
    out, manifest = converted[arch]
    for f in SERVED_FILES:
        assert (out / f).is_file(), f
    parity = manifest["onnx"]["parity_max_abs_diff"]
    assert max(parity.values()) < 1e-4, parity
    onnx_cfg = json.loads((out / "onnx" / "gliner2_config.json").read_text())
    assert onnx_cfg["counting_layer"] == architectures.COUNTING[arch]
    assert onnx_cfg["scorer"]["max_abs_score_diff"] < 1e-4
    assert onnx_cfg["scorer"]["count_embed_c1_max_abs_diff"] < 1e-4
    assert "error" not in onnx_cfg["files"]["encoder_int8"]
    # eager disentangled attention: one Softmax per layer, no SDPA NaN guards
    assert onnx_cfg["encoder_graph"]["softmax_nodes"] == onnx_cfg["encoder_graph"]["layers"] == 2
    details = json.loads((out / "manifest.json").read_text())["architecture_details"]
    assert details["gliner2"] == "span" and details["backbone"] == "deberta-v2"
    assert details["counting_layer"] == architectures.COUNTING[arch]
    assert details["backbone_name"] == architectures.BACKBONE_NAMES[arch]
    assert details["tokenizer"] == "Unigram"
    assert details["parameters"] > details["encoder_parameters"] > 0
    vocab = architectures.MULTI_VOCAB if arch == "mdeberta-v3" else None
    if vocab:
        assert details["vocab_size"] == vocab + 11
    # the reference answers exist (threshold 0 on random weights: every label answers)
    assert manifest["reference"][0]["results"][0]


def test_count_lstm_v2_exports_the_fused_layer_as_plain_ops(converted):
    """gliner2's CountLSTMv2 runs nn.TransformerEncoderLayer, whose fused fast path has no ONNX form: the
    graph must hold the rewritten attention (Softmax), and answer for field counts it was not traced with."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    from gliner2 import GLiNER2

    out, _ = converted["deberta-v3-count_lstm_v2"]
    graph = onnx.load(str(out / "onnx" / "count_embed.onnx"))
    ops = {n.op_type for n in graph.graph.node}
    assert "Softmax" in ops and not any("transformer" in op.lower() for op in ops)
    model = GLiNER2.from_pretrained(str(out)).eval()
    sess = ort.InferenceSession(str(out / "onnx" / "count_embed.onnx"), providers=["CPUExecutionProvider"])
    for fields in (1, 2, 7):
        x = torch.randn(fields, model.hidden_size, generator=torch.Generator().manual_seed(fields))
        with torch.no_grad():
            ref = model.count_embed(x, 20).numpy()
        got = sess.run(None, {"field_embs": x.numpy()})[0]
        assert np.abs(ref - got).max() < 1e-4, fields


def test_a_boundary_checkpoint_converts_to_the_boundary_fragments(checkpoints, tmp_path):
    """#32: a boundary checkpoint loads through AutoExtractor and exports the encoder, classifier and candidate
    graphs with a config the TS engine decodes by (its parity with the library: test/local/boundaryModel.test.ts)."""
    from sift_trainer.export.import_checkpoint import convert

    manifest = convert(checkpoints["boundary"], tmp_path / "out", "test/boundary-tiny", [CASE])
    assert manifest["architecture"] == "gliner2-boundary"
    assert manifest["architecture_details"]["gliner2"] == "boundary"
    assert manifest["architecture_details"]["candidate_budget"] == 128
    assert "max_width" not in manifest["onnx"] and manifest["onnx"]["candidate_budget"] == 128
    onnx = tmp_path / "out" / "onnx"
    for f in (
        "encoder.onnx",
        "encoder.int8.onnx",
        "classifier.onnx",
        "boundary_candidates.onnx",
        "boundary_explicit.onnx",
    ):
        assert (onnx / f).is_file(), f
    assert not (onnx / "span_rep.onnx").exists()
    cfg = json.loads((onnx / "gliner2_config.json").read_text())
    assert cfg["architecture"] == "boundary" and cfg["overlap_policy"] == "disallow"
    assert (cfg["pair_temperature"], cfg["enable_abstention"], cfg["abstention_threshold"]) == (1.0, True, 0.5)
    assert set(cfg["parity_max_abs_diff"]) == {
        "pair_logits",
        "null_logits",
        "explicit_logits",
        "relation_logits",
        "encoder",
        "classifier",
    }
    assert cfg["enable_relations"] is True and cfg["relation_pair_cap"] == 128
    assert max(cfg["parity_max_abs_diff"].values()) < 1e-4
    # the library's own answer on the checkpoint (threshold 0: every candidate the head keeps), for the TS side
    ref = manifest["reference"][0]["results"][0]
    assert ref["E|person|present"] == 1.0


def test_a_boundary_setting_the_export_has_not_been_tested_with_is_refused_by_name(checkpoints, tmp_path):
    from sift_trainer.export.import_checkpoint import convert

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for f in checkpoints["boundary"].rglob("*"):
        if f.is_file():
            (ckpt / f.relative_to(checkpoints["boundary"])).parent.mkdir(parents=True, exist_ok=True)
            (ckpt / f.relative_to(checkpoints["boundary"])).symlink_to(f)
    cfg = json.loads((checkpoints["boundary"] / "config.json").read_text())
    cfg["boundary_head"] = {**cfg["boundary_head"], "candidate_pool": "shared"}
    (ckpt / "config.json").unlink()
    (ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError) as e:
        convert(ckpt, tmp_path / "out", "test/boundary-shared")
    assert "boundary head settings not supported by the export yet: candidate_pool='shared'" in str(e.value)


def test_a_deberta_checkpoint_naming_code_is_refused(checkpoints, tmp_path):
    import shutil

    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["deberta-v3-count_lstm_v2"], ckpt)
    cfg = json.loads((ckpt / "encoder_config" / "config.json").read_text())
    cfg["auto_map"] = {"AutoModel": "modeling_evil.EvilModel"}
    (ckpt / "encoder_config" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"^encoder_config/config.json has an auto_map"):
        check_checkpoint(ckpt)


def test_lora_targets_deberta_attention_projections(checkpoints):
    """gliner2 selects encoder Linear layers whose name holds query/key/value/dense: DeBERTa-v2 names its
    attention projections query_proj/key_proj/value_proj, and every one of them must be a LoRA target."""
    from gliner2 import GLiNER2
    from gliner2.training.lora_targets import _resolve_targets

    model = GLiNER2.from_pretrained(str(checkpoints["deberta-v3-count_lstm_v2"]))
    targets = set(_resolve_targets(model, ["encoder"]))
    for layer in range(2):
        prefix = f"encoder.encoder.layer.{layer}."
        for name in (
            "attention.self.query_proj",
            "attention.self.key_proj",
            "attention.self.value_proj",
            "attention.output.dense",
            "intermediate.dense",
            "output.dense",
        ):
            assert prefix + name in targets, (prefix + name, sorted(targets))
    assert all(t.startswith("encoder.") for t in targets)


def test_a_boundary_head_exports_with_the_librarys_candidates_in_order(checkpoints, tmp_path):
    """#32's first fragment (export_boundary.py): onnxruntime's candidates are the library's, in the same order,
    at shapes other than the trace's; the export-only patches are undone; untested settings are refused."""
    import dataclasses

    import numpy as np
    import torch
    from gliner2 import AutoExtractor
    from gliner2.models.boundary import encoding

    from sift_trainer.export import export_boundary as eb

    model = AutoExtractor.from_pretrained(str(checkpoints["boundary"]))
    torch.manual_seed(0)  # the abstention head is zero-initialised: give it weights, so its parity means something
    torch.nn.init.normal_(model.boundary_head.null_projection.weight)
    library = (torch.sort, torch.argsort, encoding.shift_left_with_bos, model.boundary_head.boundary_proposer.settings)
    report = eb.export_boundary_candidates(model, tmp_path / "onnx")
    assert (tmp_path / "onnx" / "boundary_candidates.onnx").exists()
    assert report["candidate_budget"] == model.boundary_head.settings.candidate_budget == 128
    assert 0 < report["parity_max_abs_diff"]["pair_logits"] < 1e-4, report  # float noise, not zero: a real run
    assert report["parity_max_abs_diff"]["null_logits"] < 1e-4, report
    assert (
        torch.sort,
        torch.argsort,
        encoding.shift_left_with_bos,
        model.boundary_head.boundary_proposer.settings,
    ) == library
    # the comparison fails on a reordering (candidate order is the decoding order)
    ref = (
        torch.tensor([[[[0, 2], [1, 3]]]]),
        torch.tensor([[[1.0, 0.5]]]),
        torch.tensor([[[True, True]]]),
        torch.zeros(1, 1),
    )
    swapped = [np.array([[[[1, 3], [0, 2]]]]), np.array([[[0.5, 1.0]]]), np.array([[[True, True]]]), np.zeros((1, 1))]
    with pytest.raises(ValueError, match="candidates differ"):
        eb._compare(ref, swapped, [1])
    shared = dataclasses.replace(model.boundary_head.settings, candidate_pool="shared", boundary_attention_layers=1)
    assert eb.unexportable_settings(shared) == ["candidate_pool='shared'", "boundary_attention_layers=1"]
