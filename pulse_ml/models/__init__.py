"""Models: estimators that map session features to a predicted rating.

Their preprocessing, the family factory and the cross-fit ensemble (honest out-of-fold values).
"""
