"""Sessions: the session-table contract, feature sets and every table reader.

The first stage of the pipeline; everything downstream reads tables through this package.
"""
