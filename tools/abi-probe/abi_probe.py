#!/usr/bin/env python3
"""abi-probe: measure the upstream PJRT / XLA FFI headers for every item that
rpjrt-sys declares, and write the facts as data.

Usage:
    python3 tools/abi-probe/abi_probe.py VENDOR_DIR [--crate DIR] [--cxx g++]
                                         [--keep-probe DIR]

VENDOR_DIR is the directory that holds `xla/pjrt/c/pjrt_c_api.h` (the
`vendor/` directory of the upstream snapshot). The tool

1. lists what rpjrt-sys declares by running its test `print_declared`
   with `RPJRT_ABI_PRINT=1` (the facts its `c_api!` macro records: structs, unions
   and their fields, opaque handles, constants and enums, STRUCT_SIZE
   values, type aliases, the `PJRT_Api` slots);
2. writes a C++ probe into a temporary directory that includes the upstream
   headers and prints offsetof/sizeof/alignof, STRUCT_SIZE values, slot
   indices and constant values for exactly those items; compiles and runs it;
3. counts, from the header text, the fields of every struct and the
   enumerators of every enum we declare;
4. writes `<crate>/abi/pjrt-0.114.tsv`, which `tests/abi.rs` compares with
   the declarations row for row.

Only the Python standard library, cargo and a C++ compiler are needed. The
probe source is never written into the repository. Items declared
`@unchecked` (headers outside the vendored set) are not listed, so not probed.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

TSV_NAME = 'pjrt-0.114.tsv'


# --------------------------------------------------------------------------
# Rust side: what rpjrt-sys declares, as listed by its own ABI test
# --------------------------------------------------------------------------

def declared_rows(root, cargo):
    """Rows (kind, name, member, hint) printed by the test `print_declared` of
    rpjrt-sys (run with RPJRT_ABI_PRINT=1) (the facts its `c_api!` macro lists)."""
    cmd = [cargo, 'test', '-q', '-p', 'rpjrt-sys', '--test', 'abi', '--',
           '--exact', 'print_declared', '--nocapture']
    env = dict(os.environ, RPJRT_ABI_PRINT='1')
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        raise SystemExit('could not list the declarations (%s)' % ' '.join(cmd))
    out = r.stdout
    if 'abi-probe-begin' not in out or 'abi-probe-end' not in out:
        raise SystemExit('no declaration list in the output of %s' % ' '.join(cmd))
    body = out.split('abi-probe-begin\n', 1)[1].split('abi-probe-end', 1)[0]
    return [(line.split('\t') + [''] * 4)[:4] for line in body.splitlines() if line.strip()]


def parse_declared(rows):
    """Group the declared rows into the items the probe measures."""
    items = {'structs': [], 'unions': {}, 'opaque': [], 'consts': [],
             'sizes': [], 'aliases': [], 'enum_aliases': set()}
    records = {}
    for kind, name, member, hint in rows:
        if kind == 'struct':
            fields = []
            records[name] = fields
            items['structs'].append((name, fields, hint))
            if hint == 'union':
                items['unions'][name] = fields
        elif kind == 'field':
            records[name].append((member, hint))
        elif kind == 'struct_size':
            field = hint or records[name][-1][0]
            items['sizes'].append((name, name + '_STRUCT_SIZE', field))
        elif kind == 'opaque':
            items['opaque'].append(name)
        elif kind == 'const':
            items['consts'].append((name, hint))
        elif kind == 'type':
            items['aliases'].append((name, ''))
        elif kind == 'enumcount':
            items['enum_aliases'].add(name)
    return items


# --------------------------------------------------------------------------
# Header text side (counts only; layout comes from the compiler)
# --------------------------------------------------------------------------

def header_files(vendor):
    base = os.path.join(vendor, 'xla')
    hs = []
    pc = os.path.join(base, 'pjrt', 'c')
    for f in sorted(os.listdir(pc)):
        if f.endswith('.h'):
            hs.append(os.path.join('xla', 'pjrt', 'c', f))
    hs.append(os.path.join('xla', 'backends', 'profiler', 'plugin', 'profiler_c_api.h'))
    hs.append(os.path.join('xla', 'ffi', 'api', 'c_api.h'))
    return [h for h in hs if os.path.exists(os.path.join(vendor, h))]


def header_text(vendor, headers):
    text = ''
    for h in headers:
        t = open(os.path.join(vendor, h)).read()
        t = re.sub(r'/\*.*?\*/', ' ', t, flags=re.S)
        t = re.sub(r'//[^\n]*', '', t)
        # keep the C branch of `#ifdef __cplusplus ... #else ... #endif`
        out, stack = [], []
        for line in t.split('\n'):
            s = line.strip()
            if re.match(r'#\s*if', s):
                stack.append('__cplusplus' not in s)
                continue
            if re.match(r'#\s*else', s):
                stack[-1] = not stack[-1]
                continue
            if re.match(r'#\s*endif', s):
                stack.pop()
                continue
            if s.startswith('#'):
                continue
            if all(stack):
                out.append(line)
        text += '\n'.join(out) + '\n'
    return text


def match_brace(text, i):
    depth = 0
    for j in range(i, len(text)):
        if text[j] == '{':
            depth += 1
        elif text[j] == '}':
            depth -= 1
            if depth == 0:
                return j
    raise ValueError('unbalanced braces')


def count_decls(body):
    n, depth, cur = 0, 0, ''
    for ch in body:
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
        if ch == ';' and depth == 0:
            if cur.strip():
                n += 1
            cur = ''
        else:
            cur += ch
    return n


def c_field_counts(text):
    """struct/union name -> number of top-level members; anonymous unions
    count as one member of their parent and are reported as <Parent>_Union."""
    counts = {}
    for m in re.finditer(r'\bstruct\s+(\w+)\s*\{', text):
        name = m.group(1)
        start = m.end() - 1
        end = match_brace(text, start)
        body = text[start + 1:end]
        counts[name] = count_decls(body)
        um = re.search(r'\bunion\s*\{', body)
        if um:
            ue = match_brace(body, um.end() - 1)
            counts[name + '_Union'] = count_decls(body[um.end():ue])
        # typedef struct TAG {...} OTHER;  -> also under OTHER
        tm = re.match(r'\s*(\w+)\s*;', text[end + 1:])
        if tm and tm.group(1) != name:
            counts.setdefault(tm.group(1), counts[name])
    return counts


def c_enum_counts(text):
    counts = {}
    for m in re.finditer(r'\benum\s+(\w+)?\s*(?::\s*\w+\s*)?\{', text):
        start = m.end() - 1
        end = match_brace(text, start)
        body = text[start + 1:end]
        n = len([x for x in body.split(',') if x.strip()])
        name = m.group(1)
        tm = re.match(r'\s*(\w+)\s*;', text[end + 1:])
        if tm:
            counts[tm.group(1)] = n
        if name:
            counts.setdefault(name, n)
    return counts


# --------------------------------------------------------------------------
# Probe
# --------------------------------------------------------------------------

def build_probe(items, headers):
    L = []
    L.append('// Generated by tools/abi-probe; throwaway, never committed.')
    L.append('#include <cstddef>')
    L.append('#include <cstdio>')
    L.append('#include <algorithm>')
    for h in headers:
        L.append('#include "%s"' % h)
    L.append('#define ROW(...) std::printf(__VA_ARGS__)')
    L.append('int main() {')
    unions = items['unions']
    for name, fields, kind in items['structs']:
        if kind == 'union':
            continue
        L.append('  ROW("struct\\t%s\\t-\\t%%zu\\t%%zu\\n", sizeof(%s), alignof(%s));' % (name, name, name))
        for fname, fty in fields:
            if fty in unions:
                members = unions[fty]
                first = members[0][0]
                szs = ['sizeof(((%s*)0)->%s)' % (name, m) for m, _ in members]
                als = ['alignof(decltype(((%s*)0)->%s))' % (name, m) for m, _ in members]
                L.append('  {')
                L.append('    size_t mx = std::max({%s});' % ', '.join(szs))
                L.append('    size_t al = std::max({%s});' % ', '.join(als))
                L.append('    size_t usz = (mx + al - 1) / al * al;')
                L.append('    ROW("field\\t%s\\t%s\\t%%zu\\t%%zu\\n", offsetof(%s, %s), usz);' % (name, fname, name, first))
                L.append('    ROW("struct\\t%s\\t-\\t%%zu\\t%%zu\\n", usz, al);' % fty)
                for m, _ in members:
                    L.append('    ROW("field\\t%s\\t%s\\t%%zu\\t%%zu\\n", offsetof(%s, %s) - offsetof(%s, %s), sizeof(((%s*)0)->%s));'
                             % (fty, m, name, m, name, first, name, m))
                L.append('  }')
            else:
                L.append('  ROW("field\\t%s\\t%s\\t%%zu\\t%%zu\\n", offsetof(%s, %s), sizeof(((%s*)0)->%s));'
                         % (name, fname, name, fname, name, fname))
        if name == 'PJRT_Api':
            for fname, fty in fields:
                if fname.startswith('PJRT_'):
                    L.append('  ROW("slot\\tPJRT_Api\\t%s\\t%%zu\\t-\\n", (offsetof(PJRT_Api, %s) - 40) / sizeof(void*));'
                             % (fname, fname))
    for t, cname, field in items['sizes']:
        L.append('  ROW("struct_size\\t%s\\t-\\t%%lld\\t%s\\n", (long long)(%s_STRUCT_SIZE));' % (t, field, t))
    for name in items['opaque']:
        L.append('  { %s* p = nullptr; (void)p; ROW("opaque\\t%s\\t-\\t-\\t-\\n"); }' % (name, name))
    for name, ty in items['consts']:
        # Qualify enumerators with their enum type: works for plain enums and
        # for the scoped (`enum class`) ones some headers use in C++.
        expr = '%s::%s' % (ty, name) if ty in items['enum_aliases'] else name
        L.append('  ROW("const\\t%s\\t-\\t%%lld\\t-\\n", (long long)(%s));' % (name, expr))
    for name, rhs in items['aliases']:
        L.append('  ROW("type\\t%s\\t-\\t%%zu\\t-\\n", sizeof(%s));' % (name, name))
    L.append('  return 0;')
    L.append('}')
    return '\n'.join(L) + '\n'


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('vendor', help='directory holding xla/pjrt/c/pjrt_c_api.h')
    ap.add_argument('--crate', default=os.path.join(root, 'crates', 'rpjrt-sys'))
    ap.add_argument('--cargo', default=os.environ.get('CARGO', 'cargo'))
    ap.add_argument('--cxx', default=os.environ.get('CXX', 'g++'))
    ap.add_argument('--keep-probe', help='also copy the probe source to this directory (outside the repo)')
    a = ap.parse_args()

    vendor = os.path.abspath(a.vendor)
    if not os.path.exists(os.path.join(vendor, 'xla', 'pjrt', 'c', 'pjrt_c_api.h')):
        raise SystemExit('%s does not contain xla/pjrt/c/pjrt_c_api.h' % vendor)
    items = parse_declared(declared_rows(root, a.cargo))
    headers = header_files(vendor)
    src = build_probe(items, headers)

    with tempfile.TemporaryDirectory(prefix='abi-probe-') as tmp:
        cpath = os.path.join(tmp, 'probe.cc')
        exe = os.path.join(tmp, 'probe')
        open(cpath, 'w').write(src)
        if a.keep_probe:
            os.makedirs(a.keep_probe, exist_ok=True)
            open(os.path.join(a.keep_probe, 'probe.cc'), 'w').write(src)
        cmd = [a.cxx, '-std=c++17', '-w', '-I', vendor, cpath, '-o', exe]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr[-6000:])
            raise SystemExit('probe failed to compile (a Rust item has no counterpart in the headers?)')
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout

    rows = [l.split('\t') for l in out.splitlines() if l.strip()]
    text = header_text(vendor, headers)
    fcounts = c_field_counts(text)
    ecounts = c_enum_counts(text)
    for name, fields, kind in items['structs']:
        if name not in fcounts:
            raise SystemExit('no struct body for %s in the headers' % name)
        rows.append(['fieldcount', name, '-', str(fcounts[name]), '-'])
    for name in sorted(items['enum_aliases']):
        if name in ecounts:
            rows.append(['enumcount', name, '-', str(ecounts[name]), '-'])

    # Stable order: as generated (source order), counts last.
    tsv_path = os.path.join(a.crate, 'abi', TSV_NAME)
    os.makedirs(os.path.dirname(tsv_path), exist_ok=True)
    with open(tsv_path, 'w') as f:
        f.write('kind\tname\tmember\tvalue\textra\n')
        for r in rows:
            f.write('\t'.join(r) + '\n')
    kinds = {}
    for r in rows:
        kinds[r[0]] = kinds.get(r[0], 0) + 1
    print('wrote %s (%d rows: %s)' % (os.path.relpath(tsv_path, root), len(rows),
                                     ', '.join('%s %d' % kv for kv in sorted(kinds.items()))))


if __name__ == '__main__':
    main()
