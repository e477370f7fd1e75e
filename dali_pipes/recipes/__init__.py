"""Training recipes: the image recipe's options (validated once, shared by both backends;
`_options`, one group per stage in `_groups`) and one module per recipe op, its parameters
as pure numpy functions of (seed, epoch, key) beside its DALI graph step (`<op>_graph`);
the crop windows and flips are `dali_pipes.geometry.draws`. Presets live in presets/*.toml."""
from dali_pipes.recipes._groups import Crop, Erasing, Mixing, Output, Photometric, Policy
from dali_pipes.recipes._options import (
    BATCH_OPTIONS,
    CHANNELS,
    DTYPES,
    INTERPOLATIONS,
    MEMORY_FORMATS,
    MIX_MODES,
    PHOTOMETRIC_OPTIONS,
    POLICY_OPTIONS,
    RECIPE_DEFAULTS,
    RECIPE_OPTIONS,
    ImageRecipe,
    check_num_classes,
    image_recipe,
    size_at,
)

__all__ = [
    "BATCH_OPTIONS",
    "CHANNELS",
    "Crop",
    "DTYPES",
    "Erasing",
    "INTERPOLATIONS",
    "MEMORY_FORMATS",
    "MIX_MODES",
    "Mixing",
    "Output",
    "PHOTOMETRIC_OPTIONS",
    "POLICY_OPTIONS",
    "Photometric",
    "Policy",
    "RECIPE_DEFAULTS",
    "RECIPE_OPTIONS",
    "ImageRecipe",
    "check_num_classes",
    "image_recipe",
    "size_at",
]
