"""The variant families: the case fed other layouts, grad_outputs, values and sizes (variants,
sizes, values, repeats), and how a variant's outcome is judged (verdicts, domain).
May import: numeric, diagnosis; never run (a variant knows nothing of how it is run).
"""
