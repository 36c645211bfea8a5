"""Entry point of the rules whose jobs resume (train, evaluate): keep a killed attempt's state
only if it was made from the same inputs, then run the job's `agon` command.

Snakemake deletes a job's declared outputs before it reruns, so the state a command resumes
from (``params.state``: checkpoints/ and metrics.jsonl of a training run, samples.jsonl of an
evaluation) is deliberately not declared. The job's folder keeps ``.inputs.sha256``, the hash
of the job's input files when that state was started. If the hash differs now, the job is a
rerun for new inputs (a new config, a retrained model) and the state is removed, so nothing
stale is resumed. If it matches, the job is a rerun after a kill (`--rerun-incomplete`), and
the command resumes where it stopped.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

smk = snakemake  # noqa: F821 (injected by Snakemake's script directive)

folder = Path(smk.params.folder)
stamp = folder / ".inputs.sha256"
digest = hashlib.sha256()
for path in sorted(str(p) for p in smk.input):
    digest.update(path.encode() + b"\0" + Path(path).read_bytes())
now = digest.hexdigest()

with open(smk.log[0], "w") as log:
    state = [folder / name for name in smk.params.state if (folder / name).exists()]
    if state and (not stamp.is_file() or stamp.read_text().strip() != now):
        print(
            f"inputs changed since {folder} was started: removing {[str(p) for p in state]}",
            file=log,
            flush=True,
        )
        for p in state:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(now + "\n")
    cmd = [sys.executable, "-m", "agon", *map(str, smk.params.command)]
    if "threads_flag" in smk.params.keys():  # CLIs that size their own thread pool
        cmd += [smk.params.threads_flag, str(smk.threads)]
    print("$ " + " ".join(cmd), file=log, flush=True)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(smk.threads),
    }  # torch's intra-op threads = the job's
    sys.exit(subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode)
