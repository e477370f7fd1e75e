"""`python -m torch_bridge.check DATA`: validate a data set's files before training (the tool
lives in torch_bridge.tools.check)."""
import sys

from torch_bridge.tools.check import main

if __name__ == "__main__":
    sys.exit(main())
