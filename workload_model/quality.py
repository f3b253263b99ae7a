"""Model quality (normalized entropy, NE; lower is better) against batch size and tuning (paper Fig. 15).

At fixed hyper-parameters, large-batch synchronous GPU training regresses NE relative to the CPU
baseline's asynchronous small batches, and the gap grows with batch size (t26); a regression above
0.1-0.2 % is unacceptable. After re-tuning (Bayesian search, ~1 week), GPU training improves NE by the
per-model change the paper reports (t27, t28): ``retuned_ne_change`` below is that coefficient, taken
from the paper, so those two targets check this module's plumbing rather than a prediction.
"""

from __future__ import annotations

import numpy as np

NE_BASE = 0.80  # NE of the CPU production baseline (a typical CTR-model value)
GAP_PER_DOUBLING = 0.0006  # relative NE regression per doubling of the global batch over the CPU batch: t26
REGRESSION_THRESHOLD = 0.001  # the paper's acceptability line (0.1 %; up to 0.2 % tolerated)
RETUNED_NE_CHANGE = {"M1prod": -0.002, "M2prod": -0.001}  # paper, after re-tuning on GPUs: t27, t28


def relative_gap(gpu_batch: np.ndarray, cpu_batch: np.ndarray) -> np.ndarray:
    """Relative NE change of GPU training at fixed tuning against the CPU baseline (positive = worse)."""
    return GAP_PER_DOUBLING * np.log2(np.maximum(gpu_batch / np.maximum(cpu_batch, 1), 1.0))


def normalized_entropy(
    model: np.ndarray, on_gpu: np.ndarray, batch: np.ndarray, cpu_batch: np.ndarray, retuned: bool = False
) -> np.ndarray:
    """Expected NE of runs (vectorised); GPU runs at fixed tuning regress with batch, re-tuned ones
    improve."""
    change = relative_gap(batch, cpu_batch)
    if retuned:
        change = np.array([RETUNED_NE_CHANGE.get(m, 0.0) for m in np.unique(model)])[
            np.searchsorted(np.unique(model), model)
        ]
    return NE_BASE * (1 + np.where(on_gpu, change, 0.0))
