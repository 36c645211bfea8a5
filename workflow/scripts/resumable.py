"""The train rule's entry point: resume only what these inputs produced, then `agon train`.

A run folder keeps ``.inputs.sha256``, the hash of the job's input files (config snapshot,
data split, base models' report) when its checkpoints were started. If the hash differs now,
the job is a rerun for new inputs: checkpoints/ and metrics.jsonl are removed and training
starts fresh. If it matches, the job is a rerun after a kill, and `agon train` resumes from
its last complete checkpoint.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

smk = snakemake  # noqa: F821 (injected by Snakemake's script directive)

run = Path(smk.output.summary).parent
stamp = run / ".inputs.sha256"
digest = hashlib.sha256()
for path in sorted(str(p) for p in smk.input):
    digest.update(path.encode() + b"\0" + Path(path).read_bytes())
now = digest.hexdigest()

with open(smk.log[0], "w") as log:
    stale = [p for p in (run / "checkpoints", run / "metrics.jsonl") if p.exists()]
    if stale and (not stamp.is_file() or stamp.read_text().strip() != now):
        print(f"inputs changed since {run} was started: removing {[str(p) for p in stale]}", file=log, flush=True)
        for p in stale:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    run.mkdir(parents=True, exist_ok=True)
    stamp.write_text(now + "\n")
    cmd = [
        sys.executable, "-m", "agon", "train", "--config", smk.input.config,
        "--family", smk.wildcards.family, "--task", smk.wildcards.task, "--method", smk.wildcards.method,
        "--seed", smk.wildcards.seed, "--threads", str(smk.threads), "--out", str(run),
    ]
    print("$ " + " ".join(cmd), file=log, flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(smk.threads)}
    sys.exit(subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode)
