#!/usr/bin/env python3
"""Tests of scripts/unity_overload_check.py on a made-up build tree: what it must find (file-local
functions of one name in two files of a batch) and what it must not (members, declarations,
public functions, names in different batches). Run by `make unity-check` before the check."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, '..', '..', 'scripts', 'unity_overload_check.py')

A = '''// a.cc
#include <string>
namespace corral {
namespace {

int MakeJob(int id) {  // file-local, and b.cc has one too
  return id;
}

struct Helper {
  int Score(int x) { return x; }  // a member: never file-local
};

const char* kText = "namespace { } {{";  // braces in a literal do not count

}
int Public(int x) { return x; }  // after a bare `}`: not file-local
static long Counted(long v) {
  return v;
}
}  // namespace corral
'''

B = '''// b.cc
namespace corral {
namespace {

/* a comment with a brace { */
long MakeJob(int id,
             int gpus) {
  return id + gpus;
}
void Declared(int);  // a declaration, not a definition

int Score(int x) { return x; }

}  // namespace
int Public(int x, int y);
static long Counted(long v, long w) { return v + w; }
}  // namespace corral
'''

C = '''// c.cc, in another batch
namespace corral {
namespace {
int Score(int x) { return x; }
}  // namespace
}  // namespace corral
'''


def run(build):
    return subprocess.run([sys.executable, SCRIPT, build], capture_output=True, text=True)


def main():
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(('ok     ' if ok else 'FAILED ') + what)
        failures += not ok

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'src')
        os.makedirs(src)
        for name, text in (('a.cc', A), ('b.cc', B), ('c.cc', C)):
            with open(os.path.join(src, name), 'w') as f:
                f.write(text)
        unity = os.path.join(tmp, 'build', 'CMakeFiles', 'lib.dir', 'Unity')
        os.makedirs(unity)
        with open(os.path.join(unity, 'unity_0_cxx.cxx'), 'w') as f:
            f.write(f'#include "{src}/a.cc"\n#include "{src}/b.cc"\n')
        with open(os.path.join(unity, 'unity_1_cxx.cxx'), 'w') as f:
            f.write(f'#include "{src}/c.cc"\n')
        r = run(os.path.join(tmp, 'build'))
        found = sorted(line.split(': ')[1].split(' is ')[0] for line in r.stdout.splitlines()
                       if ' is file-local in ' in line)
        check(r.returncode == 1, f'exits 1 when a batch has a name twice (got {r.returncode})')
        check(found == ['Counted', 'MakeJob'],
              f'finds MakeJob (anonymous namespace) and Counted (static), nothing else: {found}')
        empty = os.path.join(tmp, 'empty')
        os.makedirs(empty)
        r = run(empty)
        check(r.returncode == 0 and 'skipped' in r.stdout, 'a tree without unity batches is skipped')
    if failures:
        print(f'{failures} check(s) failed')
        return 1
    print('unity_overload_check_test: all passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
