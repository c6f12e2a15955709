"""What telling ordinary English words from names costs a replay: wordfreq's import and word list.

    python scripts/bench_ordinary_words.py [--rounds 5]

Each figure comes from a fresh Python process (median of `--rounds`), so imports are cold:

- baseline: `import ragtriage.pipeline.lexical_support` (the module of `ordinary_words`; it imports
  wordfreq only on the first query with a candidate ordinary word);
- first lookup: the same, then `ordinary_words` on a query with a pasted message (imports wordfreq,
  reads its small English list);
- large list: the same lookup on wordfreq's large English list, for comparison (not used);
- per query: `ordinary_words` on 1,000 distinct queries after the list is loaded (µs each).

Printed: wall time and peak RSS (ru_maxrss) of each, and what the lookup adds to the baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_MEASURE = """
import json, resource, sys, time
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
from ragtriage.pipeline import lexical_support
base_s, base_mb = time.perf_counter() - start, rss()
mode = sys.argv[1]
t0 = time.perf_counter()
if mode == "small":
    words = lexical_support.ordinary_words("apt 报错 E: Unable to locate package 怎么办")
    assert words == {"e", "unable", "locate", "package"}, words
elif mode == "large":
    import wordfreq
    wordfreq.zipf_frequency("unable", "en", wordlist="large")
elif mode == "per_query":
    lexical_support.ordinary_words("连接数据库 connection refused 了")
    t0 = time.perf_counter()
    for i in range(1000):
        lexical_support.ordinary_words(f"第{i}次 connection refused word{i} 了")
print(json.dumps({"base_s": base_s, "base_mb": base_mb, "step_s": time.perf_counter() - t0, "mb": rss()}))
"""


def _run(mode: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _MEASURE, mode], check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = {
        mode: [_run(mode) for _ in range(args.rounds)] for mode in ("none", "small", "large", "per_query")
    }

    def median(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[mode])

    base_s, base_mb = median("none", "base_s"), median("none", "mb")
    print(f"baseline (import lexical_support): {base_s:.3f} s, peak RSS {base_mb:.1f} MB")
    for mode, label in (("small", "first lookup, small list (used)"), ("large", "first lookup, large list")):
        step, mb = median(mode, "step_s"), median(mode, "mb")
        print(
            f"{label}: +{step:.3f} s ({step / base_s:.2f} x the baseline import), "
            f"peak RSS {mb:.1f} MB (+{mb - base_mb:.1f} MB)"
        )
    print(
        f"per query after loading: {median('per_query', 'step_s') / 1000 * 1e6:.0f} µs (1,000 distinct queries)"
    )


if __name__ == "__main__":
    main()
