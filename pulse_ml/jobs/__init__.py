"""One module per CLI verb: its docstring is the ``--help`` text and it exposes ``run(cfg)``."""
