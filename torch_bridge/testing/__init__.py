"""Conformance suites of torch_bridge, shipped with it: `loader_contract.LoaderContract`,
the loader contract of a registered modality kind on both backends, subclassed once per
modality (and per store or data layout that deserves its own run), with the tiny data sets
and the backend parametrisation it needs (`tiny`). The numpy-only suites of the seams below
it are in `dali_pipes.testing`. Nothing here imports the repository's `tests`.
"""
