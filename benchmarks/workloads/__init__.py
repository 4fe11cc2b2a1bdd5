"""Workloads for the benchmarks: data files and the generators that expand them."""
