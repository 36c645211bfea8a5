"""Results files are atomic and carry config hash, seed, git commit, versions and a timestamp."""

import json

from agon.config import config_hash
from agon.provenance import atomic_write_text, read_results, write_results


def test_write_results_carries_provenance(tmp_path):
    cfg = {"a": 1}
    path = write_results(tmp_path / "sub" / "r.json", {"pass@1": 0.5}, config=cfg, seed=3, job="x")
    body = read_results(path)
    prov = body["provenance"]
    assert body["pass@1"] == 0.5
    assert prov["config_hash"] == config_hash(cfg) and prov["config"] == cfg
    assert prov["seed"] == 3 and prov["job"] == "x"
    assert prov["packages"]["agon"] and prov["timestamp"].endswith("+00:00")
    assert "commit" in prov["git"]
    assert list(path.parent.iterdir()) == [path]  # no temp file left behind


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "x.json"
    atomic_write_text(path, json.dumps({"v": 1}))

    class Boom:
        def __str__(self):
            raise RuntimeError("boom")

    try:
        atomic_write_text(path, Boom())  # type: ignore[arg-type]
    except (RuntimeError, TypeError):
        pass
    assert json.loads(path.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_host_names_the_cpu_and_torch_kernels():
    """Seeded CPU runs reproduce on the same instruction set; the provenance says which."""
    import torch

    from agon.provenance import host

    h = host()
    assert h["cpus"] >= 1 and h["platform"]
    assert h["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert h["cpu_model"] is None or isinstance(h["cpu_model"], str)
