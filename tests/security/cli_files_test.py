#!/usr/bin/env python3
"""Hostile files given to the CLI (docs/security.md, "Limits"): a YAML alias bomb ("billion
laughs"), documents nested past the depth limit in JSON and in YAML, and a file over the size
limit, each given to `corral submit -f` with no server anywhere. Each is refused before any
request, naming the limit (exit 2 for a bad document, 1 for one too big), in under 5 s and
under 200 MiB of memory.

Usage: tests/security/cli_files_test.py path/to/corral [--only TEST_NAME]
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_test  # noqa: E402  (its check and run_tests; it reads the same argv)
from e2e_test import CORRAL, check, free_port  # noqa: E402


def billion_laughs():
    text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for i in range(1, 10):
        text += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n"
    return text + "command: *a9\n"


def run_alone(args, env):
    """Runs `args` as the only child of a fresh Python, so that its peak memory is its own:
    (exit code, output, seconds, peak RSS in MiB)."""
    probe = ("import resource, subprocess, sys, json; "
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=30); "
             "print(json.dumps([r.returncode, r.stdout + r.stderr, "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True,
                          env=env, timeout=60)
    took = time.monotonic() - start
    code, output, max_kib = json.loads(done.stdout)
    return code, output, took, max_kib / 1024


def test_hostile_spec_files_are_refused_quickly_and_small(root):
    os.makedirs(root, exist_ok=True)
    env = dict(os.environ, CORRAL_SERVER=f"http://127.0.0.1:{free_port()}", CORRAL_TOKEN="none",
               HOME=root)
    cases = [
        ("a YAML alias bomb", "bomb.yaml", billion_laughs(), 1,
         "expands to more than 1000000 values"),
        ("JSON nested 100,000 deep", "deep.json", "[" * 100000 + "]" * 100000, 2,
         "nests deeper than the limit of 64 levels"),
        ("YAML nested 1,000 deep", "deep.yaml", "{a: " * 1000 + "1" + "}" * 1000, 2,
         "nests deeper than the limit of 64 levels"),
        ("a 20 MiB file", "big.yaml", "command: [true]\n" + "#" * (20 << 20) + "\n", 1,
         "over the limit of 16777216 bytes"),
        ("a 12 MiB YAML list", "list.yaml", "command:\n" + "- a\n" * (3 << 20), 1,
         "as YAML over the limit of 262144 bytes"),
        ("16 MiB of '[' as JSON", "brackets.json", "[" * (16 << 20), 2,
         "nests deeper than the limit of 64 levels"),
        ("an alias bomb of long keys", "keys.yaml",
         "k: &k {? " + "x" * (100 * 1024) + " : 1}\ncommand: [" + "*k, " * 200 + "*k]\n", 1,
         "bytes of text (YAML aliases?)"),
    ]
    for what, name, text, want, message in cases:
        path = os.path.join(root, name)
        with open(path, "w") as f:
            f.write(text)
        code, output, took, mib = run_alone([CORRAL, "submit", "-f", path], env)
        check(f"{what}: refused (exit {want}) naming the limit in {took:.2f} s, {mib:.0f} MiB",
              code == want and message in output and took < 5 and mib < 200,
              f"exit {code}: {output.strip()[:300]}")


def main():
    e2e_test.run_tests("security CLI files", (test_hostile_spec_files_are_refused_quickly_and_small,))


if __name__ == "__main__":
    main()
