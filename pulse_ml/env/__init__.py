"""The environment boundary: faults, signals, paths, atomic outputs, locks and the database probe.

Everything here is about the machine a verb runs on, not about statistics or models: a full
disk, a read-only folder, SIGTERM, a lock held by another writer, an output that would overwrite
an input. Every stage may import ``env``; ``env`` imports no stage.
"""
