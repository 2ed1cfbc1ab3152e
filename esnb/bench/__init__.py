"""Benchmarks: each measures its alternatives side by side in one run and prints ratios.

The machine is shared and noisy, so a benchmark interleaves what it compares instead of
timing one thing after the other, and reports medians.
"""
