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


def test_rewriting_a_committed_result_leaves_the_tree_clean(tmp_path):
    """A regenerating run rewrites committed results (results/regime.csv, docs/results.md): the
    tree is dirty only when something else differs from the commit."""
    import subprocess

    from agon.provenance import git_commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for f in ("results/regime.csv", "docs/results.md", "agon/x.py"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("a\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    sub = tmp_path / "agon"
    assert git_commit(sub) == {"commit": git_commit(tmp_path)["commit"], "dirty": False}
    (tmp_path / "results/regime.csv").write_text("b\n")
    (tmp_path / "docs/results.md").write_text("b\n")
    assert git_commit(sub)["dirty"] is False
    (tmp_path / "agon/x.py").write_text("b\n")
    assert git_commit(sub)["dirty"] is True  # seen from a subfolder too
