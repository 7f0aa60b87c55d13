"""Row statuses: the same five words in check and bench reports, the API and the CLI."""

#: "error": the Function (or its reference) raised, which fails its own case only; "warn": a
#: capability the reference has and the Function lacks; "skip": not run, with a reason.
PASS, FAIL, ERROR, SKIP, WARN = "pass", "fail", "error", "skip", "warn"
STATUSES = (PASS, FAIL, ERROR, SKIP, WARN)
#: How bad a status is, for the worst of several rows (a skip outranks a pass: something in
#: the group went unchecked).
SEVERITY = {ERROR: 4, FAIL: 3, WARN: 2, SKIP: 1, PASS: 0}
#: The reason of an error row that is the spec's mistake, not the Function's: the Function and
#: the reference both raise on the case's own inputs (a CLI run stops and exits 2 naming it).
SPEC_INPUTS = "spec_inputs"
