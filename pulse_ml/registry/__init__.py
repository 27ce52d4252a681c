"""Registry: the only package that imports mlflow.

Store setup, run logging and search (tag/metric key names live in ``keys``), the model registry,
the promotion rule and the pyfunc wrapper.
"""
