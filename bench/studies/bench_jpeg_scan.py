"""Cost of the per-read JPEG checks on the built-in image set (640 JPEGs of 500x375).

    python bench/studies/bench_jpeg_scan.py [--rounds 5]

Times, per image, over the files' bytes held in memory (no disk): the header walk alone
(`read_header`), the whole per-read check (`jpeg_size`: header, max_pixels and the numpy scan
check of `dali_pipes.formats.jpeg_scan`), and for scale a full strict decode with simplejpeg
(libjpeg-turbo, what `python -m torch_bridge.check --decode` runs). Prints the median of
`--rounds` rounds of each, in microseconds per image, single-threaded.
"""
from __future__ import annotations

import argparse
import statistics
import time

from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS, read_header
from dali_pipes.formats.jpeg_scan import jpeg_size
from dali_pipes.sample_data.sample_images import image_dataset


def _per_image_us(work, blobs, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for blob in blobs:
            work(blob)
        times.append((time.perf_counter() - start) / len(blobs) * 1e6)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import numpy as np
    import simplejpeg

    blobs = [np.fromfile(p, np.uint8) for p in sorted(image_dataset().glob("*/*.jpg"))]
    header = _per_image_us(read_header, blobs, args.rounds)
    full = _per_image_us(lambda b: jpeg_size(b, max_pixels=DEFAULT_MAX_PIXELS), blobs,
                         args.rounds)
    decode = _per_image_us(lambda b: simplejpeg.decode_jpeg(b.tobytes(), strict=True), blobs,
                           args.rounds)
    print(f"{len(blobs)} images, median of {args.rounds} rounds, us per image:")
    print(f"  header walk only            {header:8.1f}")
    print(f"  per-read check (jpeg_size)  {full:8.1f}   scan check adds {full - header:.1f}")
    print(f"  strict full decode          {decode:8.1f}")


if __name__ == "__main__":
    main()
