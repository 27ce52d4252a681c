"""Pure statistics: PPI/PPI++ means, arm comparisons, sequential monitoring, planners, features.

Nothing here reads files, configs or MLflow; every function takes arrays/DataFrames and returns
numbers or frozen dataclasses.
"""
