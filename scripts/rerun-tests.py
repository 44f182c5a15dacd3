#!/usr/bin/env python3
"""Runs test binaries the workspace's `cargo test` already built, again.

    python3 scripts/rerun-tests.py [--profile NAME] PACKAGE[:TARGET] ...

`cargo test -p A -p B` after `cargo test --workspace` rebuilds the crates
whose features unify differently in the smaller selection (about 4.5 minutes
of CI for the portable-tier reruns). This asks cargo for the executables of
the workspace build (`--no-run`, nothing to compile), picks those of the named
packages (every lib and test target, or only TARGET), and runs each from its
package's directory as `cargo test` does, with this process's environment
(so `PAGELAB_ISA=portable` reaches them). Exits non-zero if any test fails or
a selector matches nothing. `--profile NAME` names the profile the tests were
built with (`cargo test --profile NAME`), so that cargo finds those binaries.
"""

import json
import os
import subprocess
import sys


def main(selectors: list[str]) -> int:
    profile = []
    if selectors[:1] == ["--profile"]:
        if len(selectors) < 2:
            print("rerun-tests: --profile needs a profile name", file=sys.stderr)
            return 2
        profile, selectors = selectors[:2], selectors[2:]
    if not selectors:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    wanted = [(s.split(":", 1) + [None])[:2] for s in selectors]
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
    runs = []
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        target = msg["target"]
        if not {"lib", "test"} & set(target["kind"]):
            continue
        package = names[msg["manifest_path"]]
        for i, (name, tname) in enumerate(wanted):
            if name == package and (tname is None or tname == target["name"]):
                runs.append((i, msg["executable"], os.path.dirname(msg["manifest_path"]), f"{package}:{target['name']}"))
    missing = [selectors[i] for i in range(len(wanted)) if all(r[0] != i for r in runs)]
    if missing:
        print(f"rerun-tests: nothing built for {', '.join(missing)}", file=sys.stderr)
        return 2
    failed = []
    for _, exe, cwd, label in runs:
        print(f"rerun-tests: {label} ({os.path.basename(exe)})", flush=True)
        if subprocess.run([exe], cwd=cwd).returncode != 0:
            failed.append(label)
    if failed:
        print(f"rerun-tests: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
