"""Data writers: the built-in sample data sets `bench/compare.py` runs on (`sample_*`,
deterministic, cached) and the tiny data set of every modality kind that the tests, the
shipped conformance suites and their subclasses write (`tiny_data`). The registry names
them; numpy, Pillow and PyAV only, never torch.
"""
