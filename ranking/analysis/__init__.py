"""How far a ranking can be trusted: analyses from Vote'n'Rank, Zhang & Hardt and Colombo et al.

* :mod:`ranking.analysis.votenrank` — agreement@k, Kendall τ, discriminative power, IIA, missing scores;
* :mod:`ranking.analysis.diversity` — diversity = 1 − Kendall's W (tie-corrected, weighted);
* :mod:`ranking.analysis.sensitivity` — cardinal and ordinal sensitivity (lower bounds);
* :mod:`ranking.analysis.kemeny` — exact Kemeny consensus (DP over subsets), Borda beyond;
* :mod:`ranking.analysis.instance` — instance-level one-level and two-level aggregation;
* :mod:`ranking.analysis.synthetic` — synthetic corruption / rescaling experiments;
* :mod:`ranking.analysis.cli` — ``vnr analyze ...``.

The benchbench and ranking_nlp leaderboards they run on are read by :mod:`ranking.published` (below
:mod:`ranking.loading`, which reads them as TABLE paths). Submodules are imported on use; importing this package loads nothing heavy.
"""
