"""Row statuses: the same five words in check and bench reports, the API and the CLI."""

#: "error": the Function (or its reference) raised, which fails its own case only; "warn": a
#: capability the reference has and the Function lacks; "skip": not run, with a reason.
PASS, FAIL, ERROR, SKIP, WARN = "pass", "fail", "error", "skip", "warn"
STATUSES = (PASS, FAIL, ERROR, SKIP, WARN)
