"""The resolver's S3 sync without vLLM: names, atomic copy, reuse, refusal of odd keys."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sift_lora import is_job_adapter, local_dir, sync_adapter

NAME = "jobs/team-1/5b0c3c1e-1111-4a4a-8a8a-000000000001/model"


def store(files):
    calls = []

    def list_keys(prefix):
        return [k for k in files if k.startswith(prefix)]

    def download(key, dest):
        calls.append(key)
        Path(dest).write_text(files[key])

    return list_keys, download, calls


def test_names():
    assert is_job_adapter(NAME)
    assert not is_job_adapter("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert not is_job_adapter("jobs/../etc/model")


def test_syncs_once_and_reuses(tmp_path):
    files = {
        f"{NAME}/adapter/adapter_config.json": '{"peft_type": "LORA"}',
        f"{NAME}/adapter/adapter_model.safetensors": "w",
    }
    list_keys, download, calls = store(files)
    path = sync_adapter(NAME, "b", str(tmp_path), list_keys, download)
    assert path == local_dir(str(tmp_path), NAME)
    assert (path / "adapter_model.safetensors").read_text() == "w"
    assert sync_adapter(NAME, "b", str(tmp_path), list_keys, download) == path
    assert len(calls) == 2  # second call downloaded nothing
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".part-")] == []


def test_no_adapter_is_none(tmp_path):
    list_keys, download, _ = store({f"{NAME}/adapter.gguf": "x"})
    assert sync_adapter(NAME, "b", str(tmp_path), list_keys, download) is None


def test_refuses_escaping_keys(tmp_path):
    files = {f"{NAME}/adapter/adapter_config.json": "{}", f"{NAME}/adapter/../../evil": "x"}
    list_keys, download, _ = store(files)
    try:
        sync_adapter(NAME, "b", str(tmp_path), list_keys, download)
    except ValueError as e:
        assert "outside" in str(e)
    else:
        raise AssertionError("expected a ValueError")
    assert not (tmp_path / "evil").exists()
