"""The emulated torus lab: one network namespace per node, rate-limited veth links.
"""
