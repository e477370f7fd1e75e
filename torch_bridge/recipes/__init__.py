"""The torch steps of the recipe ops (photometric, policies, erasing, mixing): the same
parameters as the DALI graph steps in dali_pipes.recipes, applied with torch."""
