"""lm-eval interop, offline on tiny local models: agon-cascade through the lm-eval command line,
agon-moa through lm-eval's Python API, on a generic generate_until task and on agon_arith."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agon.engines import SamplingParams
from agon.engines.hf import HFEngine
from agon.random_models import build_tiny_model
from agon.systems import cascade

GENERIC_TASK = """
task: tinysum_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
output_type: generate_until
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
generation_kwargs:
  until: ["Question:"]
  max_gen_toks: 6
  do_sample: false
filter_list:
  - name: first-number
    filter:
      - function: regex
        regex_pattern: "(-?[0-9]+)"
      - function: take_first
metadata:
  version: 1.0
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("lmeval")
    models = {arch: build_tiny_model(arch, root / arch) for arch in ("qwen3", "gemma4_text")}
    data = root / "tinysum.jsonl"
    data.write_text(
        "".join(
            json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n"
            for a, b in [(2, 3), (4, 4), (1, 6)]
        )
    )
    tasks = root / "tasks"
    tasks.mkdir()
    (tasks / "tinysum_gen.yaml").write_text(GENERIC_TASK.format(data=data))
    return root, models, tasks


def _offline_env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


@pytest.mark.slow  # ~30 s: a subprocess that imports lm-eval, torch and transformers
def test_agon_cascade_runs_through_the_lm_eval_command(setup):
    root, models, tasks = setup
    out = root / "out"
    cmd = [
        sys.executable,
        "-m",
        "agon.lm_eval_interop",
        "--model",
        "agon-cascade",
        "--model_args",
        f"drafter={models['qwen3']},reader={models['gemma4_text']},dtype=float32",
        "--tasks",
        "tinysum_gen,agon_arith",
        "--include_path",
        str(tasks),
        "--limit",
        "2",
        "--gen_kwargs",
        "max_gen_toks=6",
        "--output_path",
        str(out),
        "--log_samples",
    ]
    done = subprocess.run(cmd, env=_offline_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert {"tinysum_gen", "agon_arith"} <= set(results["results"])
    assert (
        "exact_match,first-number" in results["results"]["tinysum_gen"]
        and "acc,none" in results["results"]["agon_arith"]
    )
    # what lm-eval recorded is what our cascade answers to the same context, greedy
    drafter = HFEngine(models["qwen3"], dtype="float32", device="cpu")
    reader = HFEngine(models["gemma4_text"], dtype="float32", device="cpu")
    from agon.lm_eval_interop.models import _ContextTask
    from agon.tasks import Problem

    for name in ("tinysum_gen", "agon_arith"):
        lines = [
            json.loads(x)
            for x in next(out.rglob(f"samples_{name}_*.jsonl")).read_text().splitlines()
        ]
        assert len(lines) == 2
        for line in lines:
            context, gen_kwargs = (
                line["arguments"]["gen_args_0"]["arg_0"],
                line["arguments"]["gen_args_0"]["arg_1"],
            )
            stop = tuple(gen_kwargs.get("until") or ())
            ours = cascade(drafter, reader).run(
                _ContextTask(),
                [Problem("x", context, "")],
                1,
                SamplingParams(max_new_tokens=6, temperature=0, stop=stop, seed=0),
            )
            assert line["resps"][0][0] == ours[0][0].completion


def test_agon_moa_runs_through_the_lm_eval_api(setup):
    _, models, tasks = setup
    import lm_eval
    from lm_eval.tasks import TaskManager

    from agon.lm_eval_interop import TASKS_DIR, register

    register()
    results = lm_eval.simple_evaluate(
        model="agon-moa",
        model_args=f"model_a={models['qwen3']},model_b={models['gemma4_text']},dtype=float32,proposers=2,layers=1",
        tasks=["tinysum_gen"],
        task_manager=TaskManager(
            include_path=[str(tasks), TASKS_DIR], include_defaults=False
        ),  # skip indexing lm-eval's own tasks
        limit=2,
        log_samples=True,
        gen_kwargs="max_gen_toks=4",
    )
    assert results["results"]["tinysum_gen"]["exact_match,first-number"] in (0.0, 0.5, 1.0)
    assert len(results["samples"]["tinysum_gen"]) == 2
    with pytest.raises(NotImplementedError, match="generate_until tasks only"):
        lm_eval.api.registry.get_model("agon-moa").loglikelihood(None, [])  # type: ignore[arg-type]


def test_task_yamls_are_shipped():
    from agon.lm_eval_interop import TASKS_DIR

    names = sorted(p.name for p in Path(TASKS_DIR).glob("*.yaml"))
    assert names == ["agon_arith.yaml", "agon_deepmath_hard.yaml"]


def test_model_types_are_declared_as_lm_eval_plugins():
    """The installed package advertises the same model types in lm-eval's plugin group."""
    from importlib.metadata import entry_points

    from agon.lm_eval_interop import MODEL_TYPES
    from agon.lm_eval_interop.models import AgonCascadeLM, AgonMoALM, AgonSingleLM

    declared = {
        ep.name: ep for ep in entry_points(group="lm_eval.models") if ep.value.startswith("agon.")
    }
    assert {name: ep.value for name, ep in declared.items()} == MODEL_TYPES
    assert {name: ep.load() for name, ep in declared.items()} == {
        "agon-single": AgonSingleLM,
        "agon-cascade": AgonCascadeLM,
        "agon-moa": AgonMoALM,
    }


def test_without_lm_eval_the_command_names_the_install_line():
    """lm-eval is an extra: without it, `agon-lm-eval` says which line installs it."""
    code = (
        "import sys; sys.modules['lm_eval'] = None\n"  # as if lm-eval were not installed
        "from agon.lm_eval_interop.__main__ import main\n"
        "main(['--tasks', 'agon_arith'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "pip install -e '.[lm-eval]'" in out.stderr, out.stderr
