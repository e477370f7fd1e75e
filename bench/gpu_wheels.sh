#!/usr/bin/env bash
# DALI and the wheels the GPU device image lacks, carried in parts (bench/gpu_wheels.py,
# docs/gpu.md):
#   bash bench/gpu_wheels.sh prepare    here: .whl/p0, .whl/p1, ... (one folder per call)
#   bash bench/gpu_wheels.sh receive    there, first thing in every call: checks and keeps
#                                       the carried part; exit 0 once all are unpacked in
#                                       /opt/dp-site, 4 while parts are missing, 1 on a bad one
exec python3 "$(dirname "$0")/gpu_wheels.py" "$@"
