"""Social-bias scoring: CrowS-Pairs, StereoSet and WinoBias, zero-shot, with LM likelihoods.

>>> from harness.bias import run_bias  # run_bias(BiasSpec("tiny:bert", "crows_pairs", limit=20), Path("results/bias"))

Modules: :mod:`.data` (loaders), :mod:`.scoring` (the ``score(sentences)``
interface: masked-LM pseudo-log-likelihood and causal-LM log-probability,
batched), :mod:`.align` (CrowS-Pairs shared tokens), :mod:`.evaluators` (each benchmark's
default scoring; results in :mod:`.results`), :mod:`.reference` (``scoring: reference``,
the published scripts' definitions), :mod:`.intersentence` (StereoSet intersentence: the
likelihood method and the next-sentence head), :mod:`.metrics`, :mod:`.run` (one run into
the run store), :mod:`.cli` (``vnr bias``).
Importing this package does not import torch.
"""

from harness.bias.run import run_bias

__all__ = ["run_bias"]
