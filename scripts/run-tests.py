#!/usr/bin/env python3
"""Runs the test binaries the workspace's `cargo test` built, several at a time.

    python3 scripts/run-tests.py [--profile NAME] [--jobs N] [--alone SELECTOR]...
                                 [--serial SELECTOR]... [--first SELECTOR]...
                                 (--workspace | SELECTOR...)

A SELECTOR is PACKAGE (its lib and every test target) or PACKAGE:TARGET.

`cargo test` runs one test binary at a time, so a binary of one long test (a
property test, a browser, a real program traced) leaves the other cores idle.
This asks cargo for the executables of the workspace build (`--no-run`, nothing
to compile when the build is done: `cargo test -p A -p B` after `cargo test
--workspace` would rebuild the crates whose features unify differently in the
smaller selection), and runs each from its package's directory as `cargo test`
does, with this process's environment (so `PAGELAB_ISA=portable` reaches them),
up to `--jobs` (default 1) at once. Each binary's output is printed whole when
it ends, with its wall time, so outputs never interleave.

`--alone SELECTOR`: binaries that time the machine (`machines --measure`, `bench
--predict`): each runs with no other binary beside it. `--serial SELECTOR`:
binaries that change the machine's state (the THP knobs, the hugetlb pool) and
hold it to what they saw before: at most one of them at a time, beside others
that do not (a test's own lock serialises the tests of one binary, not of two).
`--first SELECTOR`: binaries started before the rest, in the order given (the
longest, so that the last one to end does not leave a core idle). Every
selector of the three must match something built.

`--profile NAME` names the profile the tests were built with (`cargo test
--profile NAME`), so that cargo finds those binaries. Doc tests are not
binaries: run `cargo test --doc` for them. Exits non-zero if any binary fails
or a selector matches nothing; on SIGINT or SIGTERM the running binaries are
ended and nothing more starts.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

USAGE = __doc__.strip().splitlines()[2:5]


def fail(msg: str) -> int:
    print(f"run-tests: {msg}", file=sys.stderr)
    return 2


def parse(args: list[str]):
    opts = {"profile": [], "jobs": 1, "alone": [], "serial": [], "first": [], "workspace": False, "selectors": []}
    # `--opt=value` is `--opt value`.
    spread = []
    for a in args:
        if a.startswith("--") and "=" in a:
            spread.extend(a.split("=", 1))
        else:
            spread.append(a)
    args = spread
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--profile", "--jobs", "--alone", "--serial", "--first"):
            if i + 1 >= len(args):
                raise ValueError(f"{a} needs a value")
            v = args[i + 1]
            if a == "--profile":
                opts["profile"] = ["--profile", v]
            elif a == "--jobs":
                if not v.isdigit() or int(v) < 1:
                    raise ValueError(f"--jobs {v}: not a whole number of at least 1")
                opts["jobs"] = int(v)
            else:
                opts[a[2:]].append(v)
            i += 2
        elif a == "--workspace":
            opts["workspace"] = True
            i += 1
        elif a.startswith("-"):
            raise ValueError(f"{a}: not an option")
        else:
            opts["selectors"].append(a)
            i += 1
    if opts["workspace"] == bool(opts["selectors"]):
        raise ValueError("name --workspace or the packages, one of the two")
    return opts


def built(profile: list[str]):
    """Every lib and test executable of the workspace's build: (label, package, target, exe, cwd)."""
    out = subprocess.run(
        ["cargo", "test", "--locked", "--workspace", *profile, "--no-run", "--message-format=json"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--locked", "--no-deps", "--format-version", "1"],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
    )
    names = {p["manifest_path"]: p["name"] for p in meta["packages"]}
    found = []
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        target = msg["target"]
        if not {"lib", "test"} & set(target["kind"]):
            continue
        package = names[msg["manifest_path"]]
        label = f"{package}:{target['name']}"
        found.append((label, package, target["name"], msg["executable"], os.path.dirname(msg["manifest_path"])))
    return found


def matches(selector: str, package: str, target: str) -> bool:
    name, _, tname = selector.partition(":")
    return name == package and (not tname or tname == target)


def chosen(selectors: list[str], run) -> bool:
    """Whether one of `selectors` names `run` (an entry of `built`)."""
    return any(matches(s, run[1], run[2]) for s in selectors)


def main(args: list[str]) -> int:
    try:
        opts = parse(args)
    except ValueError as e:
        print("\n".join(l.strip() for l in USAGE), file=sys.stderr)
        return fail(str(e))
    every = built(opts["profile"])
    selectors = opts["selectors"]
    runs = [r for r in every if opts["workspace"] or chosen(selectors, r)]
    named = selectors + opts["alone"] + opts["serial"] + opts["first"]
    unmatched = [s for s in named if not any(chosen([s], r) for r in every)]
    if unmatched:
        return fail(f"nothing built for {', '.join(unmatched)}")
    alone = {r[0] for r in runs if chosen(opts["alone"], r)}
    serial = {r[0] for r in runs if chosen(opts["serial"], r)}
    # The --first binaries in their order, then the rest in cargo's.
    rank = {}
    for r in runs:
        for k, s in enumerate(opts["first"]):
            if chosen([s], r):
                rank.setdefault(r[0], k)
    queue = sorted(runs, key=lambda r: rank.get(r[0], len(opts["first"])))

    stop = []

    def on_signal(signum, _frame):
        stop.append(signum)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)

    running = {}  # Popen -> (label, start, output file)
    failed, times = [], []
    outdir = tempfile.mkdtemp(prefix="run-tests-")
    last_word = time.monotonic()
    started = 0

    def finish(p, code):
        label, start, out = running.pop(p)
        took = time.monotonic() - start
        times.append((took, label))
        out.seek(0)
        text = out.read()
        out.close()
        word = "ok" if code == 0 else f"FAILED (exit {code})"
        print(f"run-tests: {label}: {word}, {took:.1f} s", flush=True)
        sys.stdout.write(text)
        sys.stdout.flush()
        if code != 0:
            failed.append(label)

    try:
        while (queue or running) and not stop:
            # Start what may start: an alone binary only when nothing runs, and nothing beside
            # it; a serial one only when no other serial one runs (the next that may start
            # goes first, so a serial binary waiting holds up no other).
            while queue and len(running) < opts["jobs"] and not stop:
                now_running = [l for l, _, _ in running.values()]
                if any(l in alone for l in now_running):
                    break
                serial_running = any(l in serial for l in now_running)
                pick = None
                for k, r in enumerate(queue):
                    if r[0] in alone:
                        if not running and pick is None:
                            pick = k
                        break  # nothing passes an alone binary
                    if r[0] in serial and serial_running:
                        continue
                    pick = k
                    break
                if pick is None:
                    break
                label, _, _, exe, cwd = queue.pop(pick)
                started += 1
                out = open(os.path.join(outdir, f"{started}.log"), "w+")
                p = subprocess.Popen([exe], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                running[p] = (label, time.monotonic(), out)
                print(f"run-tests: {label} started ({os.path.basename(exe)})", flush=True)
            time.sleep(0.05)
            for p in list(running):
                code = p.poll()
                if code is not None:
                    finish(p, code)
            now = time.monotonic()
            if running and now - last_word >= 30:
                last_word = now
                still = ", ".join(f"{l} ({now - s:.0f} s)" for l, s, _ in running.values())
                print(f"run-tests: still running: {still}", flush=True)
    finally:
        for p in list(running):
            p.send_signal(signal.SIGTERM)
        for p in list(running):
            try:
                code = p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                code = p.wait()
            finish(p, code)
        shutil.rmtree(outdir, ignore_errors=True)
    if stop:
        print(f"run-tests: stopped by signal {stop[0]}; {len(queue)} binaries not run", file=sys.stderr)
        return 128 + stop[0]
    longest = ", ".join(f"{l} {t:.0f} s" for t, l in sorted(times, reverse=True)[:6])
    print(f"run-tests: {len(times)} binaries, {sum(t for t, _ in times):.0f} s in all; the longest: {longest}", flush=True)
    if failed:
        print(f"run-tests: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
