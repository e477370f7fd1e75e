"""Where and when inside a sample, as pure numpy functions (numpy only): the per-sample random
draws of (seed, epoch, key) (`draws`), clip sampling and clip crop windows (`clips`,
`clip_crops`), detection boxes and their options (`boxes`, `detection_options`), band
selection (`bands`) and the time alignment of a sensor stream to video frames (`align`)."""
