"""Data writers for tests and benchmarks: the built-in sample data sets `bench/compare.py`
runs on (`sample_*`, cached) and the tiny data sets of every modality kind the tests write
(`tiny_data`). The registry names them; numpy, Pillow and PyAV only, never torch.
"""
