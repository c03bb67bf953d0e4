"""What every benchmark section shares: the sentences it translates, median timings, the machine it ran on and what
else runs on it, and the Markdown table it prints."""
from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import torch

from attnscope.model.device import cpu_has_fast_bf16, pick_device

T = TypeVar("T")

SENTENCES = ("A man in an orange hat starring at something.", "Two dogs are running through the snow.",
             "A little girl climbs into a wooden playhouse.", "A group of people standing in front of an igloo.",
             "The woman with the red hat is reading a book in the park.")
# The longest sources of Multi30k's test sets (31-36 words): capture's cost grows with every decoding step.
LONG_SENTENCES = (
    "A man in a black jacket and checkered hat wearing black and white striped pants plays an electric guitar on a "
    "stage with a singer and another guitar player in the background.",
    "A man wearing a gray shirt, blue jeans and a neon green safety vest is standing on a railroad track with a white "
    "truck and a white building in the background.",
    "An man in his 50s with a striped button down shirt and blue jeans is sitting on the sidewalk, leaning against a "
    "barrier wall with his hand resting on his head as if he is upset.",
    "Behind a barb wired fence, there is a large ad on the side of the building above a row of cars, showing a red fox "
    "running with two small red, white, and dark grey birds.")


def median_times(fns: dict[str, Callable[[], Any]], repeats: int, clock: Callable[[], float] = time.perf_counter,
                 statistic: Callable[[list[float]], float] = statistics.median) -> dict[str, float]:
    """Median seconds of each function, run in turn within every repetition, so that a change in
    machine load (another process, CPU frequency) hits every contender alike. `clock`: wall time,
    or time.process_time for the CPU seconds this process spent (less inflated by a busy machine);
    `statistic`: min gives the runs least disturbed by other processes."""
    for fn in fns.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return {name: statistic(t) for name, t in times.items()}


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
            "device": str(pick_device()), "fast_bf16": cpu_has_fast_bf16()}


def print_table(title: str, rows: list[dict[str, Any]] | dict[str, Any]) -> None:
    rows = [rows] if isinstance(rows, dict) else rows
    print(f"\n## {title}")
    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")


def other_load() -> dict[str, Any]:
    """What else is running: load average and the busiest other processes (the machine may be shared)."""
    top = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu", "--no-headers"], capture_output=True, text=True).stdout
    rows = [line.split(None, 2) for line in top.splitlines() if len(line.split(None, 2)) == 3]
    others = [(cpu, args) for pid, cpu, args in rows if int(pid) != os.getpid() and not args.startswith("ps ")]
    busy = [f"{cpu} {args[:80]}" for cpu, args in others if float(cpu) >= 20][:4]
    return {"load average (1 min)": round(os.getloadavg()[0], 2), "busy processes (lifetime %CPU, command)": busy}


def status_kb(pid: int, key: str) -> int:
    """Field `key` (VmRSS, VmHWM, RssAnon...) of /proc/<pid>/status in kB (Linux); 0 once the process has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(rf"^{key}:\s*(\d+)", status, re.MULTILINE)
    return int(found.group(1)) if found else 0


def load_average() -> float:
    """The machine's 1-minute load average, as printed beside a figure."""
    return round(os.getloadavg()[0], 1)


def timed_runs(compute: Callable[[], T], repeats: int) -> list[tuple[float, float, float, T]]:
    """`compute()` run `repeats` + 1 times: for each, wall seconds, CPU seconds (at one thread, what a quiet machine
    would take) and the load average before it, with what it returned."""
    runs = []
    for _ in range(repeats + 1):
        load, wall, cpu = os.getloadavg()[0], time.perf_counter(), time.process_time()
        value = compute()
        runs.append((time.perf_counter() - wall, time.process_time() - cpu, load, value))
    return runs


def first_fastest_median(runs: list[tuple[float, float, float, Any]]) -> dict[str, str]:
    """The first run (cold), then the fastest and the median of the others: "wall / CPU (load)" each."""
    first, rest = runs[0], sorted(runs[1:], key=lambda r: r[0])
    return {f"{which} s wall / CPU (load)": f"{r[0]:.2f} / {r[1]:.2f} ({r[2]:.1f})"
            for which, r in (("first", first), ("fastest", rest[0]), ("median", rest[len(rest) // 2]))}
