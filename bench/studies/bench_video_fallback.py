"""Where the CPU time of a PyAV-decoded clip goes, per stage, one thread each.

    python bench/studies/bench_video_fallback.py --data FOLDER [--clips 24] [--size 112 112]

For clips DALI cannot decode on the CPU backend (H.264, HEVC, AV1, MPEG-4) both backends
decode with the same PyAV call; what differs is the rest. Prints CPU ms per clip of:
PyAV decode of the clip (`read(i, DecodedClipRead(frames))`), torchvision's uint8
antialiased resize (the torch path's), DALI's CPU resize + crop_mirror_normalize of the
full-size frames (the graph before the feed resized fallback clips), DALI's
crop_mirror_normalize of pre-resized frames (the graph now), and a pickle round trip of
full-size and resized frames (what feed workers ship).
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
import time


def _cpu_ms(fn, items) -> float:
    t0 = time.process_time()
    for item in items:
        fn(item)
    return 1e3 * (time.process_time() - t0) / len(items)


def _dali_ms(clips, size, resize: bool) -> float:
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import Pipeline
    pipe = Pipeline(batch_size=8, num_threads=1, device_id=None, exec_dynamic=True,
                    prefetch_queue_depth=1)
    with pipe:
        x = fn.external_source(name="d", dtype=types.UINT8, ndim=4, layout="FHWC")
        if resize:
            x = fn.resize(x, size=list(size), antialias=True, interp_type=types.INTERP_LINEAR)
        pipe.set_outputs(fn.crop_mirror_normalize(x, dtype=types.FLOAT, output_layout="FCHW",
                                                  mean=[0.0] * 3, std=[1.0] * 3))
    pipe.build()
    batches = [clips[i:i + 8] for i in range(0, len(clips) - len(clips) % 8, 8)]
    pipe.feed_input("d", batches[0])
    pipe.run()  # warm-up
    t0 = time.process_time()
    for batch in batches:
        pipe.feed_input("d", batch)
        pipe.run()
    return 1e3 * (time.process_time() - t0) / (8 * len(batches))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="class folders of video files")
    p.add_argument("--clips", type=int, default=24)
    p.add_argument("--size", type=int, nargs=2, default=(112, 112))
    args = p.parse_args(argv)
    import torch

    from dali_pipes.sources.protocol import DecodedClipRead
    from dali_pipes.sources.video import VideoFolderSource
    from torch_bridge.modalities.clip_resize import resize_clip
    torch.set_num_threads(1)
    src = VideoFolderSource(args.data, clip_length=8)
    n = min(args.clips, len(src))
    frames = [src.clip_indices(0, 0, [i], train=True)[0] for i in range(n)]
    def decode(i: int):
        return src.read(i, DecodedClipRead(frames[i]))
    out = {"pyav_decode_clip": _cpu_ms(decode, range(n))}
    clips = [decode(i) for i in range(n)]
    small = [resize_clip(c, tuple(args.size)) for c in clips]
    out["torchvision_resize"] = _cpu_ms(lambda c: resize_clip(c, tuple(args.size)), clips)
    out["dali_resize_normalize"] = _dali_ms(clips, args.size, resize=True)
    out["dali_normalize_resized"] = _dali_ms(small, args.size, resize=False)
    out["pickle_full_size"] = _cpu_ms(lambda c: pickle.loads(pickle.dumps(c, 5)), clips)
    out["pickle_resized"] = _cpu_ms(lambda c: pickle.loads(pickle.dumps(c, 5)), small)
    print(json.dumps({"clips": n, "frame_shape": list(clips[0].shape[1:]),
                      "cpu_ms_per_clip": {k: round(v, 2) for k, v in out.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
