"""`python -m torch_bridge.doctor`: check the environment (the tool lives in
torch_bridge.tools.doctor)."""
import sys

from torch_bridge.tools.doctor import main

if __name__ == "__main__":
    sys.exit(main())
