"""Entry point of the rules whose jobs resume (train, evaluate): keep a killed attempt's state
only if it was made from the same inputs by the same code, then run the job's `agon` command.

Snakemake deletes a job's declared outputs before it reruns, so the state a command resumes
from (``params.state``: checkpoints/ and metrics.jsonl of a training run, samples.jsonl of an
evaluation) is deliberately not declared. The job's folder keeps ``.inputs.sha256``, the hash
of the job's input files and of the package's source (agon.provenance.source_fingerprint) when
that state was started, and ``.complete`` once the command succeeded. The state is removed,
and the job starts fresh, when:

- the hash differs now: new inputs (a new config, a retrained model) or new code;
- ``.complete`` is there: the job had finished, so this is a forced rerun (``--forcerun``, or
  an output deleted by hand), which must compute its results again, not return the old ones.

Otherwise the job is a rerun after a kill (``--rerun-incomplete``), and the command resumes
where it stopped.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from agon.provenance import source_fingerprint

smk = snakemake  # noqa: F821 (injected by Snakemake's script directive)

folder = Path(smk.params.folder)
stamp = folder / ".inputs.sha256"
complete = folder / ".complete"
digest = hashlib.sha256()
for path in sorted(str(p) for p in smk.input):
    digest.update(path.encode() + b"\0" + Path(path).read_bytes())
digest.update(b"code\0" + source_fingerprint().encode())
now = digest.hexdigest()

with open(smk.log[0], "w") as log:
    state = [folder / name for name in smk.params.state if (folder / name).exists()]
    why = None
    if state and complete.exists():
        why = "the job had finished: a forced rerun starts fresh"
    elif state and (not stamp.is_file() or stamp.read_text().strip() != now):
        why = "inputs or code changed since the state was started"
    if why:
        print(f"{why}: removing {[str(p) for p in state]} in {folder}", file=log, flush=True)
        for p in state:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    complete.unlink(missing_ok=True)
    stamp.write_text(now + "\n")
    cmd = [sys.executable, "-m", "agon", *map(str, smk.params.command)]
    if "threads_flag" in smk.params.keys():  # CLIs that size their own thread pool
        cmd += [smk.params.threads_flag, str(smk.threads)]
    print("$ " + " ".join(cmd), file=log, flush=True)
    # torch's intra-op threads = the job's
    env = {**os.environ, "OMP_NUM_THREADS": str(smk.threads)}
    code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    if code == 0:
        complete.write_text("")
    sys.exit(code)
