"""Order: which sample, on which rank, with which augmentation parameters, and how far an
epoch got (the plan, samplers, shard order, resume state)."""
