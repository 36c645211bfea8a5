"""Config loading: the shipped configs validate; bad rows fail naming row, field and expectation."""

from pathlib import Path

import pytest
import yaml

from agon.config import ConfigError, config_hash, deep_merge, get_family, load_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_shipped_configs_validate(name):
    config = load_config(ROOT / "config" / name)
    assert config["families"] and config["tasks"] and config["methods"]
    # defaults are filled in
    assert config["grading"]["timeout_s"] > 0
    for fam in config["families"]:
        assert "system_prompt" in fam["model_a"] and "chat_template_kwargs" in fam["model_b"]


def test_paper_config_has_the_three_families():
    config = load_config(ROOT / "config" / "paper.yaml")
    ids = {f["name"]: (f["model_a"]["model"], f["model_b"]["model"]) for f in config["families"]}
    assert set(ids) == {"qwen3", "qwen3_5", "gemma4"}
    assert ids["qwen3"][0].startswith("Qwen/Qwen3-")
    assert ids["qwen3_5"][0].startswith("Qwen/Qwen3.5-")
    assert ids["gemma4"][0].startswith("google/gemma-4-")


def _write(tmp_path, config):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _minimal():
    return {
        "families": [{"name": "ok", "model_a": {"model": "x"}, "model_b": {"model": "y"}}],
        "tasks": [{"name": "deepmath"}],
        "methods": ["base"],
    }


def test_bad_row_names_row_field_and_expectation(tmp_path):
    config = _minimal()
    config["families"].append(
        {"name": "qwen3", "model_a": {"model": "x", "chat_template_kwargs": 3}, "dtype": "fp8"}
    )
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, config))
    msg = str(err.value)
    assert "families[1] (name 'qwen3'): field 'model_b': expected a value" in msg
    assert "field 'dtype': expected one of ['float32', 'bfloat16', 'float16', 'auto']" in msg
    assert "field 'model_a.chat_template_kwargs': expected type object" in msg
    assert "families[0]" not in msg  # the good row is not blamed


def test_each_problem_is_reported_once(tmp_path):
    """Several missing fields at one level are each named once, and counted once."""
    config = {"families": [{"name": "x", "model_b": {"model": "y"}, "model_c": 1}]}
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, config))
    lines = str(err.value).splitlines()[1:]
    assert len(lines) == len(set(lines)) == 4, lines
    assert str(err.value).startswith(f"{tmp_path / 'c.yaml'}: invalid config (4 problem(s))")
    for field in ("'tasks'", "'methods'", "'model_a'", "'model_c'"):
        assert sum(f"field {field}" in line for line in lines) == 1, field


def test_unknown_field_is_named(tmp_path):
    config = _minimal()
    config["families"][0]["model_a"]["modle"] = "typo"
    with pytest.raises(ConfigError, match=r"field 'model_a.modle': expected no such field"):
        load_config(_write(tmp_path, config))


def test_unknown_task_and_duplicate_family(tmp_path):
    config = _minimal()
    config["tasks"] = [{"name": "nosuch"}]
    config["families"].append(dict(config["families"][0]))
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, config))
    assert "tasks[0] (name 'nosuch'): field 'name'" in str(err.value)
    assert "repeated: ['ok']" in str(err.value)


def test_k_larger_than_n_samples_fails(tmp_path):
    config = _minimal()
    config["eval"] = {"n_samples": 2, "k": [1, 4]}
    with pytest.raises(
        ConfigError, match=r"eval: field 'k': expected values <= n_samples=2, got \[4\]"
    ):
        load_config(_write(tmp_path, config))


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(path)


def test_overrides_hash_and_family_lookup(tmp_path):
    path = _write(tmp_path, _minimal())
    a = load_config(path)
    b = load_config(path, overrides={"eval": {"n_samples": 8}})
    assert b["eval"]["n_samples"] == 8 and a["eval"]["n_samples"] == 4
    assert config_hash(a) != config_hash(b)
    assert config_hash(a) == config_hash(load_config(path))
    assert get_family(a, "ok")["model_b"]["model"] == "y"
    with pytest.raises(ConfigError, match="no family 'zz'"):
        get_family(a, "zz")
    assert deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"b": 3}}) == {"a": {"b": 3, "c": 2}}


def test_snakefile_and_cli_share_one_schema():
    schema = ROOT / "workflow" / "schemas" / "config.schema.yaml"
    assert schema.resolve() == (ROOT / "agon" / "schemas" / "config.schema.yaml").resolve()


def test_the_schema_file_is_parsed_once_for_validation_and_settings(monkeypatch):
    """One cached parse of the schema file serves validation and every settings field."""
    from agon import config as cfg
    from agon.methods import TABLE1_METHODS
    from agon.training import settings as st

    parses = []

    def counted(real):
        def parse(stream, *args, **kwargs):
            if getattr(stream, "name", None) == str(cfg.SCHEMA_PATH):
                parses.append(stream.name)
            return real(stream, *args, **kwargs)

        return parse

    monkeypatch.setattr(yaml, "load", counted(yaml.load))  # safe_load calls it too
    cfg.config_schema.cache_clear()
    try:
        for _ in range(2):
            load_config(ROOT / "config" / "config.yaml")
        st.schema_node("train.steps")
        st.check_key("agon.num_reads", 2)
    finally:
        cfg.config_schema.cache_clear()  # the next caller parses it afresh, unpatched
    assert len(parses) == 1
    assert st.config_schema is cfg.config_schema
    # the one copy has the registry's method names filled in
    assert cfg.config_schema()["properties"]["methods"]["items"]["enum"] == list(TABLE1_METHODS)
