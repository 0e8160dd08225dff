"""Simulation support: sandbox roots and stand-ins for running mcd without a node or a cluster.

Nothing here is used on the production path; the demo, the tests and the benchmarks use it.
"""
