"""The checks, in four rooms by role; each room's __init__ says what it may import.

diagnosis/ (what an error means, what turns red) <- numeric/ (the checks of one case) <-
families/ (the variant families) <- run/ (Options, work items, workers).  Each check returns
typed rows (gradlab.results); nothing here prints or words a result.  docs/architecture.md.
"""
