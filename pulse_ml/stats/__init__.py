"""Pure statistics: PPI/PPI++ means, arm comparisons, sequential monitoring, planners, features.

Nothing here reads files, configs or MLflow; every function takes arrays/DataFrames and returns
numbers or frozen dataclasses.
"""

from pulse_ml.stats.arm_effect import ArmComparison, Estimate, compare_arms, theoretical_width_ratio
from pulse_ml.stats.feature_tests import compare_features, labeled_shift
from pulse_ml.stats.permutation import permutation_pvalue
from pulse_ml.stats.power import LabelPlan, labels_needed
from pulse_ml.stats.ppi import (
    PPIMean,
    classical_mean_ci,
    ppi_mean,
    ppi_mean_ci,
    ppi_mean_pointestimate,
    ppi_power_tuned_lambda,
)
from pulse_ml.stats.sequential import (
    MonitorPlan,
    MonitorResult,
    SequentialPlan,
    cs_multiplier,
    first_crossing_probabilities,
    mixture_rho,
    monitor_effect,
    plan_monitoring,
    simulate_monitoring,
)

__all__ = [
    "ArmComparison",
    "Estimate",
    "LabelPlan",
    "MonitorPlan",
    "MonitorResult",
    "PPIMean",
    "SequentialPlan",
    "classical_mean_ci",
    "compare_arms",
    "compare_features",
    "cs_multiplier",
    "first_crossing_probabilities",
    "labeled_shift",
    "labels_needed",
    "mixture_rho",
    "monitor_effect",
    "permutation_pvalue",
    "plan_monitoring",
    "ppi_mean",
    "ppi_mean_ci",
    "ppi_mean_pointestimate",
    "ppi_power_tuned_lambda",
    "simulate_monitoring",
    "theoretical_width_ratio",
]
