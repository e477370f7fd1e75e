"""Conformance suites shipped with the seams they prove, subclassed once per implementation
(as zarr ships `StoreTests`): `store_tests.StoreTests` (a `Store`) and
`source_tests.SourceTests` (a `Source`); the loader contract, which needs torch, is
`torch_bridge.testing.loader_contract.LoaderContract`. They import pytest, never `tests`.
"""
