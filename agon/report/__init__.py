"""The report: the tables and figures made from the evaluations and training runs.

- :mod:`~agon.report.table1`: table 1 (``agon report``);
- :mod:`~agon.report.related`: the methods published beside Agon (``agon report --related``);
- :mod:`~agon.report.ablations`: the Agon variants (``agon report --ablations``);
- :mod:`~agon.report.compare`: what every table computes alike (pass@1 over seeds and
  problems, paired ratios and differences with two-level bootstrap intervals);
- :mod:`~agon.report.compute`: the compute columns (per model steps, tokens, seconds; budgets);
- :mod:`~agon.report.render`: a table's CSV and Markdown;
- :mod:`~agon.report.figures`: the paper's figures;
- :mod:`~agon.report.origin`: what made a table's numbers (code versions, kinds of machine);
- :mod:`~agon.report.write`: one write-and-provenance path for every table;
- :mod:`~agon.report.docs`: docs/results.md, every published table with its provenance
  (``agon report --docs``); :mod:`~agon.report.docs_costs`: its benchmarks and what
  regenerating each results tree cost.

Where each result lives is :mod:`agon.results`; pass@k and the bootstrap, which evaluation
uses too, are :mod:`agon.stats`.
"""
