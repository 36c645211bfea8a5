"""Write one job's config snapshot (the rule's ``params.config``) as YAML, atomically.

The snapshot is validated like any config, so a job never starts on a config the CLIs would
reject, and it is what the job's CLI reads (`--config`).
"""

import sys

import yaml

from agon.config import ConfigError, config_hash, validate_config
from agon.provenance import atomic_write_text

smk = snakemake  # noqa: F821 (injected by Snakemake's script directive)

with open(smk.log[0], "w") as log:
    cfg = dict(smk.params.config)
    try:
        validate_config(cfg)
    except ConfigError as err:
        print(err, file=log)
        sys.exit(1)
    digest = config_hash(smk.params.config)
    header = f"# config snapshot written by the workflow; hash {digest}; do not edit\n"
    atomic_write_text(smk.output[0], header + yaml.safe_dump(cfg, sort_keys=False))
    print(f"wrote {smk.output[0]}", file=log)
