"""The run machinery: a run's Options, the work items (plan), the rows of one item (runner), and
where the items run (driver, isolate, warm: here or in worker processes, side by side).
May import: diagnosis, numeric, families; no other room imports run.
"""
