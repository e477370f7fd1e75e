"""`python -m dali_pipes.frames extract SRC DST [--quality 90] [--every N]`: class folders of
videos -> class folders of per-frame JPEG folders (the tool lives in
dali_pipes.sources.frames, beside the frame-folder sources that read what it writes)."""
import sys

from dali_pipes.sources.frames import main

if __name__ == "__main__":
    sys.exit(main())
