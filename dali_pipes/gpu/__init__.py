"""GPU-side probes and helpers: CuPy's CUDA libraries, NVDEC codec support and the
hardware video decoder's limits."""
