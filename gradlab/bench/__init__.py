"""Phase-aware timing and memory of custom Functions against their autograd references.

stats: summaries and bootstrap intervals; timing: blocks, warm-up, alternating sampler;
memory: saved bytes and CUDA peak; impl: the Task of each phase; runner: the run;
compare: two runs row by row.  Results are gradlab.results.bench; gradlab.render shows them.
"""

# After this line `gradlab.bench.compare` is the function, not the module: take the module's
# names with `from gradlab.bench.compare import ...` (which finds the module, not the function).
from gradlab.bench.compare import (
    DEFAULT_THRESHOLD,
    CompareRow,
    compare,
    env_differences,
    regressions,
)
from gradlab.bench.impl import PHASES
from gradlab.bench.memory import saved_bytes
from gradlab.bench.runner import BenchOptions, bench_case, bench_cases, run, total_steps
from gradlab.bench.stats import bootstrap_ratio, summarize
from gradlab.bench.timing import (
    DEFAULT_MAX_TIME,
    DEFAULT_MIN_SAMPLES,
    DEFAULT_MIN_TIME,
    DEFAULT_WARMUP_TIME,
    sample_interleaved,
)
from gradlab.results.bench import BenchError, BenchReport, BenchRow

__all__ = ["DEFAULT_MAX_TIME", "DEFAULT_MIN_SAMPLES", "DEFAULT_MIN_TIME", "DEFAULT_THRESHOLD",
           "DEFAULT_WARMUP_TIME", "PHASES", "BenchError", "BenchOptions", "BenchReport",
           "BenchRow", "CompareRow", "bench_case", "bench_cases", "bootstrap_ratio", "compare",
           "env_differences", "regressions", "run", "sample_interleaved", "saved_bytes",
           "summarize", "total_steps"]
