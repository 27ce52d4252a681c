"""Jobs: one thin module per CLI verb (config → settings → stage call → report → registry).

Each module's docstring is its ``--help`` text; it exposes ``settings_from_config`` and ``run``.
"""
