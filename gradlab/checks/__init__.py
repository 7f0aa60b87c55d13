"""The checks: one module per family, driven by gradlab.checks.run.runner.

Flow for one case: execute (a forward + backward) -> compare (forward, gradient) and contract
-> variants (the same, fed other layouts and subsets) -> numerical (jacobian) and second_order.
Each returns typed rows (gradlab.results); nothing here prints or words a result.
"""
