"""`python -m dali_pipes.pack SRC DST`: pack a data set into tar shards."""
import sys

from dali_pipes.pack import main

sys.exit(main())
