"""How far a ranking can be trusted: analyses from Vote'n'Rank, Zhang & Hardt and Colombo et al.

* :mod:`ranking.analysis.votenrank` — agreement@k, Kendall τ, discriminative power, IIA, missing scores;
* :mod:`ranking.analysis.diversity` — diversity = 1 − Kendall's W (tie-corrected, weighted);
* :mod:`ranking.analysis.sensitivity` — cardinal and ordinal sensitivity (lower bounds);
* :mod:`ranking.analysis.kemeny` — exact Kemeny consensus (DP over subsets), Borda beyond;
* :mod:`ranking.analysis.instance` — instance-level one-level and two-level aggregation;
* :mod:`ranking.analysis.synthetic` — synthetic corruption / rescaling experiments;
* :mod:`ranking.analysis.data` — loaders for the benchbench and ranking_nlp leaderboards;
* :mod:`ranking.analysis.cli` — ``vnr analyze ...``.

Submodules are imported on use; importing this package loads nothing heavy.
"""
