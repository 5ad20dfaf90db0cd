#!/usr/bin/env python3
"""kiln calibrate streams its data: over 2000 samples its peak RSS stays
within 1.1x of the peak over 20 samples (the samples: 12 KiB each, 24 MiB
in all, more than 10% of the process if they were all held).

Usage: test_calib_memory.py KILN"""
import os
import subprocess
import sys
import tempfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def peak_rss_kib(cmd):
    # under AddressSanitizer (make test-asan) freed memory waits in a
    # quarantine of up to 256 MB by default, which grows the RSS with every
    # sample's buffers although nothing is kept: keep the quarantine small
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1").lstrip(":")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    sys.stderr.write(err)
    return ru.ru_maxrss


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(here, "gen_quant_models.py"), tmp, "--samples", "1", "--eval", "1"],
                       check=True)
        rng = np.random.default_rng(3)
        big = rng.standard_normal((2000, 1, 3, 32, 32)).astype(np.float32)
        np.save(os.path.join(tmp, "big.npy"), big)
        np.save(os.path.join(tmp, "small.npy"), big[:20])
        model = os.path.join(tmp, "cnn.onnx")
        small = peak_rss_kib([kiln, "calibrate", model, "--data", os.path.join(tmp, "small.npy"),
                              "-o", os.path.join(tmp, "s.json")])
        large = peak_rss_kib([kiln, "calibrate", model, "--data", os.path.join(tmp, "big.npy"),
                              "-o", os.path.join(tmp, "l.json")])
        ratio = large / small
        print(f"peak RSS: 20 samples {small} KiB, 2000 samples {large} KiB, ratio {ratio:.3f} (limit 1.1; "
              f"the data set is {big.nbytes >> 10} KiB)")
        if ratio > 1.1:
            sys.exit("FAIL: calibration memory grows with the number of samples")


if __name__ == "__main__":
    main()
