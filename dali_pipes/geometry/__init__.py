"""Where and when inside a sample, as pure numpy functions (numpy only): the per-sample
random draws of (seed, epoch, key) (`draws`) and what they place."""
