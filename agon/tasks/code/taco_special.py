"""TACO's special-judge test problems, from TACO's own list.

``FlagOpen/TACO``, ``output_spj.jsonl`` (as of commit 29e9a2a9982122b38cbe54284472b78639d911d4,
2025-12-03): one row per problem of TACO's test split, by position (``idx`` 0-999), with
``special_judge`` and ``case``: 1 non-deterministic output, 2 case-insensitive strings, 3
floating point with a tolerance (the README's three scenarios); two flagged rows have case 0.
The list is kept here (218 of 1000 problems) because it lives in the GitHub repository, not in
the hub data set; a task can read another copy of the file (``special_judge_file``).
"""

from __future__ import annotations

import json
from pathlib import Path

KINDS = {1: "nondeterministic", 2: "case_insensitive", 3: "float_tolerance", 0: "unspecified"}
"""TACO's ``case`` numbers as the names used in ``meta["special_judge_kind"]``."""

_TEST_SPLIT = {
    "nondeterministic": (
        "5 10 16 36 42 47 54 56 71 77 81 83 84 90 94 106 115 119 137 140 143 155 161 162 173 175 "
        "179 186 205 210 211 220 221 229 238 240 242 249 258 259 260 287 289 290 295 298 305 308 "
        "327 335 342 343 347 351 353 362 373 375 379 381 383 391 394 400 408 412 417 422 444 465 "
        "475 477 485 487 488 490 510 519 552 555 558 561 565 574 577 582 594 601 615 617 621 628 "
        "630 638 647 649 663 665 673 677 702 718 720 726 734 742 754 771 775 784 785 790 818 822 "
        "825 831 832 834 850 856 869 870 876 918 919 936 942 945 946 952 958 968 969 972 984 986 "
        "991"
    ),
    "case_insensitive": (
        "20 28 41 72 96 107 130 169 188 257 264 268 279 294 318 329 337 366 384 447 451 508 522 "
        "527 531 568 578 579 583 625 629 695 723 774 820 864 867 889 957 962 988 992"
    ),
    "float_tolerance": (
        "18 23 134 141 147 168 191 198 243 253 323 331 334 348 504 526 543 550 554 586 587 610 "
        "641 659 667 671 675 743 805 808 815 868 916 941 953 967 990"
    ),
    "unspecified": "382 852",
}


def taco_special_judges(path: str | None = None) -> dict[int, str]:
    """Position in TACO's test split -> special-judge kind, from TACO's list (or the
    ``output_spj.jsonl``-format file at ``path``)."""
    if path is None:
        return {int(i): kind for kind, ids in _TEST_SPLIT.items() for i in ids.split()}
    out = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if row["special_judge"]:
                out[int(row["idx"])] = KINDS.get(int(row.get("case") or 0), "unspecified")
    return out
