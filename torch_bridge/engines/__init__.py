"""Engines: what turns plan batches into tensors. `dali` drives DALI pipelines; `reference`
is the plain PyTorch Dataset + DataLoader path. Modules with a leading underscore are internals
(collate, feed workers, pipeline rings, worker processes, device transfer)."""
