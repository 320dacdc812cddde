"""Reference simulators, checks, reports and benchmarks."""
