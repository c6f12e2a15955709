"""Replay of a logged request through its profile's pipeline, and fidelity: how exactly a replay
reproduces each stage production logged, with the documented reason of every difference.
"""
