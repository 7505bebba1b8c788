"""sift_trainer.export.import_checkpoint: a gliner2 checkpoint as a user downloads it -> Sift's served layout
(the TS side, test/local/modelImport.test.ts, checks the engine's parity and serving)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PKG_ROOT, SERVED_FILES, events, job_env

from sift_trainer.export.import_checkpoint import CheckpointError, check_checkpoint

CASE = {
    "name": "entities",
    "threshold": 0.3,
    "texts": ["Tim Cook leads Apple in Cupertino."],
    "schema": {
        "entities": [{"name": "person"}, {"name": "company"}],
        "classifications": [],
        "structures": [],
        "relations": [],
    },
}


def checkpoint_copy(src: Path, to: Path, link_weights: bool = False) -> Path:
    """Only what ``GLiNER2.save_pretrained`` writes (no onnx/, no manifest.json)."""
    to.mkdir(parents=True)
    shutil.copytree(src / "encoder_config", to / "encoder_config")
    for f in src.iterdir():
        if f.is_file() and (
            f.name in ("config.json", "model.safetensors")
            or f.name.startswith("tokenizer")
            or f.name == "special_tokens_map.json"
        ):
            if link_weights and f.name == "model.safetensors":
                (to / f.name).symlink_to(f)
            else:
                shutil.copy(f, to / f.name)
    return to


def convert(ckpt: Path, out: Path, tmp: Path) -> subprocess.CompletedProcess:
    cases = tmp / "cases.json"
    cases.write_text(json.dumps([CASE]))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sift_trainer.export.import_checkpoint",
            "convert",
            "--checkpoint",
            str(ckpt),
            "--out",
            str(out),
            "--model-id",
            "fastino/gliner2-base-v1",
            "--cases",
            str(cases),
            "--reference",
            str(tmp / "ref.json"),
        ],
        cwd=str(PKG_ROOT),
        env={**job_env(tmp), "SIFT_TORCH_THREADS": "1"},
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_converts_a_pytorch_bin_checkpoint_to_the_served_layout(tmp_path, encoder_base):
    import torch
    from safetensors.torch import load_file

    from sift_trainer.build.build_mini import weights_digest

    ckpt = checkpoint_copy(encoder_base, tmp_path / "ckpt")
    # older checkpoints ship pickled weights: converted to model.safetensors, the same tensors
    torch.save(load_file(str(ckpt / "model.safetensors")), ckpt / "pytorch_model.bin")
    (ckpt / "model.safetensors").unlink()
    out = tmp_path / "out"
    p = convert(ckpt, out, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert [e["event"] for e in events(p.stdout)][-1] == "import_done"
    for f in SERVED_FILES:
        assert (out / f).is_file(), f
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model_id"] == "fastino/gliner2-base-v1"
    assert manifest["source"]["weights_file"] == "pytorch_model.bin"
    assert manifest["weights_sha256"] == weights_digest(encoder_base / "model.safetensors")
    assert max(manifest["onnx"]["parity_max_abs_diff"].values()) < 1e-3
    ref = json.loads((tmp_path / "ref.json").read_text())
    assert ref[0]["name"] == "entities" and len(ref[0]["results"]) == 1
    # the parity reference must hold answers: an empty one would make the TS engine's parity vacuous
    assert ref[0]["results"][0], ref
    assert all(k.startswith("E|") for k in ref[0]["results"][0])


def test_a_checkpoint_whose_export_disagrees_is_refused(tmp_path, encoder_base, monkeypatch):
    """Negative control of the parity the import reports: one exported graph changed after export
    (the classifier's weights shifted by 0.05) must fail the check, and nothing is published."""
    import onnx
    from onnx import numpy_helper

    from sift_trainer.export import export_onnx, import_checkpoint

    export = export_onnx._export

    def export_then_perturb(module, args, path, *rest):
        export(module, args, path, *rest)
        if Path(path).name == "classifier.onnx":
            graph = onnx.load(str(path))
            init = next(
                i
                for i in graph.graph.initializer
                if numpy_helper.to_array(i).dtype.kind == "f" and numpy_helper.to_array(i).size > 1
            )
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) + 0.05, init.name))
            onnx.save(graph, str(path))

    monkeypatch.setattr(export_onnx, "_export", export_then_perturb)
    ckpt = checkpoint_copy(encoder_base, tmp_path / "ckpt", link_weights=True)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match=r"^ONNX parity check failed: ") as e:
        import_checkpoint.convert(ckpt, out, "fastino/gliner2-base-v1")
    parity = ast.literal_eval(str(e.value).removeprefix("ONNX parity check failed: "))
    assert parity["classifier"] > 1e-3  # the changed graph is the one found ...
    assert max(v for k, v in parity.items() if k != "classifier") < 1e-3  # ... and only it
    assert not (out / "manifest.json").exists()


def test_a_truncated_weights_file_is_refused_naming_it(tmp_path, encoder_base):
    ckpt = checkpoint_copy(encoder_base, tmp_path / "ckpt")
    with open(ckpt / "model.safetensors", "r+b") as f:
        f.truncate(4096)
    p = convert(ckpt, tmp_path / "out", tmp_path)
    assert p.returncode == 2
    last = events(p.stdout)[-1]
    assert last["event"] == "import_failed"
    assert last["error"].startswith(f"gliner2 could not load the checkpoint at {ckpt}: ")
    assert "model.safetensors" in last["error"]
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda d: (d / "model.safetensors").unlink(),
            "holds no weights: expected model.safetensors or pytorch_model.bin",
        ),
        (
            lambda d: (d / "config.json").write_text("{not json"),
            "config.json (the gliner2 model config) is not valid JSON",
        ),
        (lambda d: shutil.rmtree(d / "encoder_config"), "encoder_config/config.json (the backbone config) is missing"),
        (lambda d: [p.unlink() for p in d.glob("tokenizer*")], "holds no tokenizer"),
        (
            lambda d: _edit_config(d, architecture="token"),
            "architecture is 'token': Sift's ONNX fragments export 'span' and 'boundary' GLiNER2 models",
        ),
        (
            lambda d: _edit_config(d, counting_layer="count_mlp"),
            "counting_layer is 'count_mlp': the engine supports count_lstm, count_lstm_v2",
        ),
    ],
)
def test_checkpoint_check_names_what_is_wrong(tmp_path, encoder_base, change, message):
    ckpt = checkpoint_copy(encoder_base, tmp_path / "ckpt", link_weights=True)
    check_checkpoint(ckpt)  # the untouched copy passes
    change(ckpt)
    with pytest.raises(CheckpointError) as e:
        check_checkpoint(ckpt)
    assert message in str(e.value)


def _edit_config(d: Path, **changes) -> None:
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, **changes}))


# F14: gliner2 builds the encoder with trust_remote_code=True, so a config's auto_map would import and run
# the Python it names. The code below writes a marker when it runs; the import must refuse before that.
EVIL = """import pathlib
pathlib.Path({marker!r}).write_text("checkpoint code ran")
from transformers import BertConfig, BertModel
class EvilConfig(BertConfig):
    pass
class EvilModel(BertModel):
    config_class = EvilConfig
"""


def _add_code(ckpt: Path, config: str, marker: Path) -> None:
    where = (ckpt / config).parent
    (where / "evil.py").write_text(EVIL.format(marker=str(marker)))
    cfg = json.loads((ckpt / config).read_text()) if (ckpt / config).exists() else {}
    cfg["auto_map"] = {
        "AutoConfig": "evil.EvilConfig",
        "AutoModel": "evil.EvilModel",
        "AutoTokenizer": ["evil.EvilConfig", None],
    }
    (ckpt / config).write_text(json.dumps(cfg))


@pytest.mark.parametrize("config", ["encoder_config/config.json", "config.json", "tokenizer_config.json"])
def test_a_config_that_names_code_is_refused(tmp_path, encoder_base, config):
    ckpt = checkpoint_copy(encoder_base, tmp_path / "ckpt", link_weights=True)
    _add_code(ckpt, config, tmp_path / "ran")
    with pytest.raises(CheckpointError) as e:
        check_checkpoint(ckpt)
    assert str(e.value).startswith(
        f"{config} has an auto_map, which names Python code for transformers to import and run"
    )


def test_a_nested_auto_map_is_refused_too(tmp_path, encoder_base):
    ckpt = checkpoint_copy(encoder_base, tmp_path / "ckpt", link_weights=True)
    _edit_config(ckpt, encoder={"model_type": "bert", "auto_map": {"AutoModel": "evil.EvilModel"}})
    with pytest.raises(CheckpointError, match="config.json has an auto_map"):
        check_checkpoint(ckpt)


def test_convert_refuses_checkpoint_code_without_running_it(tmp_path, encoder_base):
    ckpt = checkpoint_copy(encoder_base, tmp_path / "ckpt", link_weights=True)
    marker = tmp_path / "ran"
    _add_code(ckpt, "encoder_config/config.json", marker)
    p = convert(ckpt, tmp_path / "out", tmp_path)
    assert p.returncode == 2, p.stderr[-3000:]
    last = events(p.stdout)[-1]
    assert last["event"] == "import_failed"
    assert last["error"].startswith("encoder_config/config.json has an auto_map")
    assert not marker.exists()
    assert not (tmp_path / "out").exists()


def test_only_known_files_are_loaded_or_downloaded(tmp_path, encoder_base):
    from fnmatch import fnmatch

    from sift_trainer.export.import_checkpoint import DOWNLOAD_PATTERNS, known_files_view

    ckpt = checkpoint_copy(encoder_base, tmp_path / "ckpt", link_weights=True)
    for extra in ("encoder_config/modeling_evil.py", "evil.py", "README.md", "tokenizer_evil.py", "vocab.py"):
        (ckpt / extra).write_text("raise SystemExit('never loaded')\n")
    view = known_files_view(ckpt, tmp_path / "view")
    seen = sorted(str(f.relative_to(view)) for f in view.rglob("*") if not f.is_dir())
    assert seen == sorted(
        str(f.relative_to(ckpt)) for f in ckpt.rglob("*") if f.is_file() and f.suffix != ".py" and f.name != "README.md"
    )
    assert not any(f.endswith(".py") for f in seen)
    # a hub download asks for exact names: no pattern matches a Python file beside them
    for extra in ("encoder_config/modeling_evil.py", "tokenizer_evil.py", "vocab.py", "sentencepiece_evil.py"):
        assert not any(fnmatch(extra, pattern) for pattern in DOWNLOAD_PATTERNS), extra
