"""Benchmarks: side-by-side ratios against what a user would use instead (not timed tests)."""
