#!/usr/bin/env python3
"""unity_overload_check.py BUILD_DIR: same-named file-local functions inside one unity batch.

CMake's unity build (CORRAL_UNITY, docs/decisions.md "CI's builds") compiles a batch of .cc files
as one translation unit, so the functions each file keeps to itself (in an anonymous namespace,
or `static`) share one scope. Two with the same name and the same signature fail to compile;
two with the same name and different signatures compile as overloads, and a call in one file
may silently pick the other file's function (session 43 found eta_test.cc's MakeJob calling
scheduler_test.cc's). This check lists every name defined file-locally in two files of one
batch. It reads the batches CMake generated under BUILD_DIR (CMakeFiles/*.dir/Unity/*.cxx), so
it needs a configured build tree; without one it says so and succeeds.

Heuristic: braces are counted (outside comments and literals) to know the scope; a function
definition is a line at namespace scope of the form `TYPE NAME(`, not a declaration (`;` before
the body's `{`), directly inside `namespace {` or starting with `static`. Exits 1 when any name
is found twice in one batch, printing the batch, the name and the files.
"""
import collections
import glob
import os
import re
import sys

FUNCTION = re.compile(r'^(?:static\s+|inline\s+|constexpr\s+|\[\[\w+\]\]\s+)*'
                      r'(?!(?:return|if|for|while|switch|using|namespace|typedef|TEST\w*)\b)'
                      r'[A-Za-z_][\w:<>,\s\*&]*?[\s\*&](\w+)\(')
KEYWORDS = {'operator', 'TEST', 'TEST_F', 'TEST_P', 'INSTANTIATE_TEST_SUITE_P', 'MATCHER', 'MATCHER_P'}


def code_of(line, in_block_comment):
    """`line` without comments and string or character literals; and whether a /* */ comment is
    still open at its end."""
    out = []
    i = 0
    while i < len(line):
        if in_block_comment:
            end = line.find('*/', i)
            if end == -1:
                return ''.join(out), True
            i, in_block_comment = end + 2, False
            continue
        if line.startswith('//', i):
            break
        if line.startswith('/*', i):
            in_block_comment = True
            i += 2
            continue
        c = line[i]
        if c in '"\'':
            j = i + 1
            while j < len(line) and line[j] != c:
                j += 2 if line[j] == '\\' else 1
            i = j + 1
            out.append(c + c)
            continue
        out.append(c)
        i += 1
    return ''.join(out), in_block_comment


def local_functions(path):
    """Names of the functions `path` defines in an anonymous namespace or as `static`, at
    namespace scope (braces are counted, so a function body or class is never a scope)."""
    names = set()
    scopes = []  # (anonymous?, brace depth inside the namespace)
    depth = 0
    in_comment = False
    lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
    for i, raw in enumerate(lines):
        code, in_comment = code_of(raw, in_comment)
        opened = re.match(r'^\s*(?:inline\s+)?namespace(\s+[\w:]+)?\s*\{', code)
        at_namespace_scope = depth == (scopes[-1][1] if scopes else 0)
        m = FUNCTION.match(code)
        if not opened and at_namespace_scope and m and m.group(1) not in KEYWORDS:
            anonymous = bool(scopes) and scopes[-1][0]
            if anonymous or code.startswith('static '):
                # A definition, not a declaration: the first of `;` and `{` after the name is `{`.
                rest = '\n'.join(code_of(l, False)[0] for l in lines[i:i + 20])[m.end():]
                brace, semi = rest.find('{'), rest.find(';')
                if brace != -1 and (semi == -1 or brace < semi):
                    names.add(m.group(1))
        depth += code.count('{') - code.count('}')
        while scopes and depth < scopes[-1][1]:
            scopes.pop()
        if opened:
            scopes.append((opened.group(1) is None, depth))
    return names


def main():
    if len(sys.argv) != 2:
        print(__doc__.split('\n')[0], file=sys.stderr)
        return 2
    units = sorted(glob.glob(os.path.join(sys.argv[1], '**', 'CMakeFiles', '*.dir', 'Unity', '*.cxx'),
                         recursive=True))
    if not units:
        print(f'unity_overload_check: no unity batches under {sys.argv[1]} (configure a build first); skipped')
        return 0
    found = 0
    for unit in units:
        files = re.findall(r'#include "([^"]+\.cc)"', open(unit).read())
        where = collections.defaultdict(list)
        for f in files:
            if os.path.exists(f):
                for name in local_functions(f):
                    where[name].append(f)
        target = unit.split('CMakeFiles' + os.sep)[1].split(os.sep)[0].removesuffix('.dir')
        for name, fs in sorted(where.items()):
            if len(fs) > 1:
                found += 1
                shown = ', '.join(os.path.relpath(f) for f in fs)
                print(f'{target} ({os.path.basename(unit)}): {name} is file-local in {shown}')
    if found:
        print(f'unity_overload_check: {found} name(s) defined file-locally in two files of one unity batch: '
              'rename one (a different signature compiles as an overload a call can silently pick)')
        return 1
    print(f'unity_overload_check: {len(units)} unity batches, no file-local name defined twice in one')
    return 0


if __name__ == '__main__':
    sys.exit(main())
