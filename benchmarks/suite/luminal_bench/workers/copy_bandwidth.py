"""The memory bandwidth a copy reaches on a device: `dst.copy_(src)` over a buffer of
--gib GiB of random bf16, --reps timed copies after three warm-ups, each timed with CUDA
events on a GPU (perf_counter after a synchronize elsewhere). A copy reads and writes
every byte, so one copy moves 2 x the buffer; the median copy gives the bandwidth the
suite divides the weight bytes a decode step reads by (its floor). Prints one
`BANDWIDTH_RESULT {json}` line."""
from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()

    import torch

    device = torch.device(args.device)
    count = int(args.gib * 2**30) // 2
    # Random data, not zeros: never time on zeros (METHOD.md; they can run faster than real data).
    src = torch.randn(count, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    samples = []
    for i in range(3 + args.reps):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            ms = begin.elapsed_time(end)
        else:
            start = time.perf_counter()
            dst.copy_(src)
            ms = (time.perf_counter() - start) * 1e3
        if i >= 3:
            samples.append(ms)
    if not torch.equal(dst, src):
        raise SystemExit("the copy is wrong: dst differs from src")
    moved = 2 * src.numel() * src.element_size()
    median_ms = statistics.median(samples)
    result = {"device": str(device), "name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "buffer_bytes": src.numel() * src.element_size(), "bytes_per_copy": moved, "copy_ms_samples": samples,
              "copy_ms": median_ms, "bandwidth_gbs": moved / median_ms / 1e6}
    print("BANDWIDTH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
