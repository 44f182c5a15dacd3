#!/usr/bin/env python3
"""Which replacement the machine's L2 follows, read from `pagelab machines --measure` ladders.

Usage: l2_replacement.py LADDER... [--l2 512K] [--ways 8] [--line 64] [--page 4K]
                                   [--l3-from 1M] [--l3-to 2M] [--trials 2000]

Each LADDER is the standard output of a `pagelab machines --measure` run (its first
table: footprint, ns a step of the chase on 2M-advised pages, on 4K pages, and what 4K
adds). The chase is one random cycle through every 64-byte line of the footprint, the
same cycle pass after pass: a cyclic access. On a guest whose host maps its memory with
`--page` pages (4K here, `[nested] host_page`), the lines of a footprint fall into the
L2's sets as the host placed those pages: each page's lines fill one of the L2's `colors`
(its sets of size / ways / page) and the host picks the color of each page at random. A
set then holds as many of the cycle's lines as its color has pages.

What each replacement makes of a set that holds k lines of a cycle, in the steady state:
- LRU (and tree pseudo-LRU): every access misses once k exceeds the ways; none before;
- random: a share that grows from 0 with k (simulated here).

So the share of the chase's steps that miss the L2 is, over the host's random colors,
E[sum over colors of n_c * miss(n_c)] / pages, where n_c counts the pages of color c.
The machine's share is read from its time: (ns - the L2's ns) / (the L3's ns - the L2's
ns), with the L2's ns the median of the ladder's steps between a sixteenth and a quarter
of the L2's size and the L3's between --l3-from and --l3-to. The table prints, for each
footprint from a quarter of the L2 to twice it, the machine's share in each ladder, their
median, and what LRU and random replacement give. Nothing is fitted.
"""

import argparse
import random
import re
import statistics
import sys

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text, what):
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([KMG]?)", text.strip())
    if not m:
        raise ValueError(f"{what}: `{text}` is not a size (like 512K, 1.2M or 4096)")
    return float(m.group(1)) * UNITS[m.group(2)]


def read_ladder(path):
    """The ladder's rows as (footprint in bytes, ns a step on 2M-advised pages)."""
    try:
        lines = open(path, encoding="utf-8").read().split("\n")
    except OSError as e:
        sys.exit(f"l2_replacement: {path}: {e.strerror}")
    rows = []
    start = next((i for i, l in enumerate(lines) if l.split()[:1] == ["footprint"]), None)
    if start is None:
        sys.exit(f"l2_replacement: {path}: no ladder: no line starts with `footprint` "
                 "(give the standard output of `pagelab machines --measure`)")
    for n, line in enumerate(lines[start + 1:], start + 2):
        f = line.split()
        if len(f) < 2:
            break
        try:
            footprint = size(f[0], "footprint")
        except ValueError as e:
            sys.exit(f"l2_replacement: {path}, line {n}: {e}")
        try:
            rows.append((footprint, float(f[1])))
        except ValueError:
            sys.exit(f"l2_replacement: {path}, line {n}: ns a step on 2M-advised pages: "
                     f"`{f[1]}` is not a number")
    if not rows:
        sys.exit(f"l2_replacement: {path}, line {start + 1}: the ladder has no rows")
    return rows


def random_miss(k, ways, rng, passes=400, warm=40):
    """The steady share of misses of a set of `ways` ways under random replacement, that
    k lines visit in a fixed cyclic order."""
    if k <= ways:
        return 0.0
    held, misses, total = [], 0, 0
    for p in range(passes):
        for x in range(k):
            hit = x in held
            if not hit:
                if len(held) < ways:
                    held.append(x)
                else:
                    held[rng.randrange(ways)] = x
            if p >= warm:
                total += 1
                misses += not hit
    return misses / total


def expected(pages, colors, miss, trials, rng):
    """E[sum n_c * miss(n_c)] / pages over pages placed in colors at random."""
    acc = 0.0
    for _ in range(trials):
        n = [0] * colors
        for _ in range(pages):
            n[rng.randrange(colors)] += 1
        acc += sum(c * miss(c) for c in n) / pages
    return acc / trials


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("ladders", nargs="+")
    a.add_argument("--l2", default="512K")
    a.add_argument("--ways", type=int, default=8)
    a.add_argument("--line", default="64")
    a.add_argument("--page", default="4K", help="the host's page (the unit a color is picked for)")
    a.add_argument("--l3-from", default="1M")
    a.add_argument("--l3-to", default="2M")
    a.add_argument("--trials", type=int, default=2000)
    o = a.parse_args()
    try:
        l2, line, page = size(o.l2, "--l2"), size(o.line, "--line"), size(o.page, "--page")
        l3_from, l3_to = size(o.l3_from, "--l3-from"), size(o.l3_to, "--l3-to")
    except ValueError as e:
        sys.exit(f"l2_replacement: {e}")
    sets = l2 / line / o.ways
    colors = l2 / o.ways / page
    if o.ways < 1 or sets != int(sets) or colors < 1 or colors != int(colors):
        sys.exit(f"l2_replacement: --l2 {o.l2} with --ways {o.ways}, --line {o.line} and "
                 f"--page {o.page}: the sets ({sets:g}) and the colors a page picks "
                 f"(size / ways / page = {colors:g}) must be whole numbers")
    colors = int(colors)
    ladders = [read_ladder(p) for p in o.ladders]

    rng = random.Random(1)
    table = {}
    def random_k(k):
        if k not in table:
            table[k] = random_miss(k, o.ways, rng)
        return table[k]
    lru_k = lambda k: 1.0 if k > o.ways else 0.0

    levels = []
    for path, rows in zip(o.ladders, ladders):
        at_l2 = [ns for f, ns in rows if l2 / 16 <= f <= l2 / 4]
        at_l3 = [ns for f, ns in rows if l3_from <= f <= l3_to]
        if not at_l2 or not at_l3:
            sys.exit(f"l2_replacement: {path}: the ladder has no step between "
                     f"{l2 / 16 / 1024:g}K and {l2 / 4 / 1024:g}K or none between "
                     f"{o.l3_from} and {o.l3_to}: it must span both to read the L2's and the L3's time")
        levels.append((statistics.median(at_l2), statistics.median(at_l3)))
    print(f"L2 {o.l2}, {o.ways} ways, {int(sets)} sets; {colors} colors of {o.page} pages; "
          "the L2's and the L3's ns in each ladder: "
          + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in levels))
    feet = sorted({f for rows in ladders for f, _ in rows if l2 / 4 <= f <= 2 * l2})
    head = ["footprint"] + [f"#{i + 1}" for i in range(len(ladders))] + ["median", "LRU", "random"]
    print("share of the chase's steps that miss the L2")
    print("".join(f"{h:>10}" for h in head))
    fits = {"LRU": [], "random": []}
    for f in feet:
        shares = []
        for (ns_l2, ns_l3), rows in zip(levels, ladders):
            ns = next((ns for g, ns in rows if g == f), None)
            shares.append(None if ns is None else (ns - ns_l2) / (ns_l3 - ns_l2))
        have = [s for s in shares if s is not None]
        med = statistics.median(have)
        pages = max(1, round(f / page))
        lru = expected(pages, colors, lru_k, o.trials, rng)
        rnd = expected(pages, colors, random_k, o.trials, rng)
        fits["LRU"].append(abs(med - lru))
        fits["random"].append(abs(med - rnd))
        cells = [f"{f / 1024:.0f}K"] + ["-" if s is None else f"{s:.2f}" for s in shares]
        cells += [f"{med:.2f}", f"{lru:.2f}", f"{rnd:.2f}"]
        print("".join(f"{c:>10}" for c in cells))
    for k, v in fits.items():
        print(f"{k}: the median's mean distance {statistics.mean(v):.3f}, the largest {max(v):.3f}")


if __name__ == "__main__":
    main()
