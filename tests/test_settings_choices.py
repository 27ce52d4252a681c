"""The words of the choice settings checked before a job is imported are the jobs' own words."""

from __future__ import annotations

import pytest

from pulse_ml.config import Node
from pulse_ml.errors import PulseError
from pulse_ml.settings_choices import CHOICES, check_choices


def test_the_early_words_are_exactly_the_keys_the_jobs_read():
    from pulse_ml.inference.effects import CLUSTER_MODES
    from pulse_ml.inference.honest import PREDICTION_MODES
    from pulse_ml.inference.monitor import LAMBDA_RULES
    from pulse_ml.inference.randomization import INFERENCE_MODES
    from pulse_ml.jobs.audit import REFERENCES
    from pulse_ml.jobs.train import GROUP_MODES, PROMOTE_MODES
    from pulse_ml.training.promotion_rule import RULES
    from pulse_ml.training.samplers import PRUNERS, SAMPLERS
    from pulse_ml.training.tuning import OBJECTIVES

    training = {"objective": OBJECTIVES, "tuning.sampler": SAMPLERS, "tuning.pruner": PRUNERS,
                "cv.group_by": GROUP_MODES, "promotion.rule": RULES, "promote": PROMOTE_MODES}
    expected = {
        "infer": {"ppi.predictions": PREDICTION_MODES, "clusters": CLUSTER_MODES,
                  "inference": INFERENCE_MODES,
                  "randomization.statistic": {"studentized": "", "effect": ""}},
        "monitor": {"ppi.predictions": PREDICTION_MODES, "clusters": CLUSTER_MODES,
                    "lambda_rule": LAMBDA_RULES},
        "audit": {"ppi.predictions": PREDICTION_MODES, "clusters": CLUSTER_MODES,
                  "reference": REFERENCES},
        "train": training,
        "pipeline": {**training, "infer.predictions": PREDICTION_MODES,
                     "infer.clusters": CLUSTER_MODES},
        "score": {"engine": {"local": "", "spark": ""}},
    }
    assert {v: {k: tuple(w) for k, w in keys.items()} for v, keys in expected.items()} == CHOICES


@pytest.mark.parametrize(("verb", "data", "message"), [
    ("infer", {"inference": "asymptotc"}, "inference=asymptotc is not an option. Did you mean "
     "asymptotic? Use one of: asymptotic, randomization, both."),
    ("train", {"tuning": {"sampler": "randm"}}, "tuning.sampler=randm is not an option. Did you "
     "mean random?"),
    ("infer", {"inference": "both", "randomization": {"statistic": "t"}},
     "randomization.statistic=t is not an option."),
])
def test_a_wrong_word_is_refused_with_the_closest(verb, data, message):
    with pytest.raises(PulseError, match="is not an option") as err:
        check_choices(verb, Node(data))
    assert message in str(err.value)


def test_absent_keys_and_unused_randomization_keys_pass():
    check_choices("infer", Node({}))
    check_choices("infer", Node({"inference": "asymptotic",
                                 "randomization": {"statistic": "whatever"}}))
    check_choices("score", Node({"engine": "spark"}))
    check_choices("plan", Node({"anything": "x"}))  # a verb without choices
