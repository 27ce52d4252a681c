"""How many rated sessions per arm does an A/B test need, naive vs with prediction power?

Uses the registered model's honest (out-of-fold) correlation with the ratings and the rating
s.d. of its training data (both overridable), the expected unlabeled sessions per arm and the
smallest effect worth detecting; prints labels per arm for a two-sided test at ``alpha`` with
``power``, for the naive difference of means and for PPI++, and the saving.

Example:
    pulse-ml plan effect=0.1 n_unlabeled=5000
"""

from __future__ import annotations

import numpy as np

from pulse_ml.config import number, require
from pulse_ml.errors import PulseError
from pulse_ml.training.metrics import pearson


def run(cfg):
    """Entry point of ``pulse-ml plan``."""
    from pulse_ml.registry import models
    from pulse_ml.stats import labels_needed, theoretical_width_ratio

    require(cfg, "effect", "plan")
    effect = number(cfg, "effect", "plan")
    if effect == 0:
        raise PulseError("effect=0 cannot be detected; give the smallest effect that matters, "
                         "e.g. effect=0.05.")
    rho = number(cfg, "rho", "plan", -1, 1, optional=True)
    sd = number(cfg, "sd", "plan", 0, None, open_interval=True, optional=True)
    source = "given"
    if rho is None or sd is None:
        ensemble, version = models.load_model(str(cfg.model_uri))
        oof = ensemble.oof
        source = (f"{cfg.model_uri} (version {getattr(version, 'version', '?')}, "
                  f"{ensemble.family}, {len(oof)} out-of-fold predictions)")
        rho = pearson(oof["rating"].to_numpy(), oof["prediction"].to_numpy()) if rho is None \
            else rho
        sd = float(np.std(oof["rating"].to_numpy(), ddof=1)) if sd is None else sd
    n_unl = number(cfg, "n_unlabeled", "plan", 0, None, integer=True)
    alpha = number(cfg, "alpha", "plan", 0, 1, open_interval=True)
    power = number(cfg, "power", "plan", alpha / 2, 1, open_interval=True)
    rho = float(rho)
    if rho <= 0:
        print(f"note: honest r {rho:.3f} <= 0: PPI++ sets lambda to 0 and gains nothing; "
              "planning with r = 0.")
    plan = labels_needed(effect, float(sd), max(rho, 0.0), n_unl, alpha, power)
    print(f"to detect an effect of {effect:+.3f} stars (two-sided alpha {cfg.alpha}, power "
          f"{cfg.power}) with rating s.d. {float(sd):.3f}, honest r {float(rho):.3f} from "
          f"{source}, and {n_unl:,} unlabeled sessions per arm:")
    print(f"  naive A/B test : {plan.n_naive:>7,} rated sessions per arm")
    print(f"  with PPI++     : {plan.n_ppi:>7,} rated sessions per arm")
    print(f"  saving         : {plan.saving:>7,} per arm ({plan.saving_pct:.1f}%)")
    ratio = theoretical_width_ratio(max(rho, 0.0), plan.n_ppi, n_unl)
    print(f"  (CI width ratio at that size: {float(ratio):.3f}; a better predictor, not more "
          "unlabeled data, is what narrows it further)")
    return plan
