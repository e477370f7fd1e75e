"""Where does a training step's time go? The parts of bench/diagnose.py:

classify  Evidence -> Diagnosis, pure (THRESHOLDS, ADVICE)
probes    kernel and driver counters: CPU per core, disk, storage reads, NVML engines
loop      the warm-up and timed steps under the probes; run_diagnosis -> report dict
report    the report as text
"""
from bench.diagnosis.classify import ADVICE, THRESHOLDS, Diagnosis, Evidence, classify

__all__ = ["ADVICE", "THRESHOLDS", "Diagnosis", "Evidence", "classify"]
