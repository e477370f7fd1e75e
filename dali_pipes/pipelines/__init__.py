"""DALI graph builders, one per modality. They import DALI, never torch, and never iterate."""
