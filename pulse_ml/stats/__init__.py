"""Pure statistics: PPI/PPI++ means, arm comparisons, sequential monitoring, planners, features.

Nothing here reads files, configs or MLflow; every function takes arrays/DataFrames and returns
numbers or frozen dataclasses.
"""

from pulse_ml.stats.arm_effect import (
    ArmComparison,
    BatchComparison,
    Estimate,
    compare_arms,
    compare_batch,
    theoretical_width_ratio,
)
from pulse_ml.stats.feature_tests import compare_features, labeled_shift
from pulse_ml.stats.half_checks import BiasCheck, HalvesAudit, audit_halves
from pulse_ml.stats.permutation import permutation_pvalue
from pulse_ml.stats.power import (
    ArmDesign,
    DesignEffect,
    LabelPlan,
    arm_design,
    design_effect,
    labels_needed,
    planned_power,
)
from pulse_ml.stats.ppi import (
    PPIMean,
    classical_mean_ci,
    ppi_mean,
    ppi_mean_ci,
    ppi_mean_pointestimate,
    ppi_power_tuned_lambda,
)
from pulse_ml.stats.propensity import (
    PredictionShift,
    crossfit_propensity,
    inverse_propensity_weights,
    prediction_shift,
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
from pulse_ml.stats.split_half import (
    ArmArrays,
    ConsistencyCheck,
    SplitHalfAudit,
    labeled_unlabeled_consistency,
    split_half_audit,
)

__all__ = [
    "ArmArrays",
    "ArmDesign",
    "ArmComparison",
    "BatchComparison",
    "BiasCheck",
    "ConsistencyCheck",
    "DesignEffect",
    "Estimate",
    "HalvesAudit",
    "LabelPlan",
    "MonitorPlan",
    "MonitorResult",
    "PPIMean",
    "SequentialPlan",
    "PredictionShift",
    "SplitHalfAudit",
    "classical_mean_ci",
    "arm_design",
    "audit_halves",
    "compare_arms",
    "compare_batch",
    "compare_features",
    "cs_multiplier",
    "first_crossing_probabilities",
    "crossfit_propensity",
    "design_effect",
    "inverse_propensity_weights",
    "labeled_shift",
    "labeled_unlabeled_consistency",
    "labels_needed",
    "mixture_rho",
    "monitor_effect",
    "permutation_pvalue",
    "plan_monitoring",
    "planned_power",
    "ppi_mean",
    "ppi_mean_ci",
    "ppi_mean_pointestimate",
    "ppi_power_tuned_lambda",
    "simulate_monitoring",
    "prediction_shift",
    "split_half_audit",
    "theoretical_width_ratio",
]
