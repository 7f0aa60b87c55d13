"""The checks made on one case: forward and gradient against the reference, the contract,
Jacobians, second order, forward mode, autocast and capabilities, with the case context they share.
May import: diagnosis; never families or run (a check knows nothing of how it is run).
"""
