#!/usr/bin/env python3
"""abi-probe: measure the upstream PJRT / XLA FFI headers for every item that
rpjrt-sys declares, and write the facts as data.

Usage:
    python3 tools/abi-probe/abi_probe.py VENDOR_DIR [--crate DIR] [--cxx g++]
                                         [--keep-probe DIR]

VENDOR_DIR is the directory that holds `xla/pjrt/c/pjrt_c_api.h` (the
`vendor/` directory of the upstream snapshot). The tool

1. reads our Rust declarations in `<crate>/src/{pjrt,ext,ffi}.rs` (structs,
   unions and their fields, opaque handles, constants, `struct_size!` uses,
   plain type aliases, the `PJRT_Api` slots);
2. writes a C++ probe into a temporary directory that includes the upstream
   headers and prints offsetof/sizeof/alignof, STRUCT_SIZE values, slot
   indices and constant values for exactly those items; compiles it with
   g++ and runs it;
3. counts, from the header text, the fields of every struct and the
   enumerators of every enum we declare;
4. writes `<crate>/abi/pjrt-0.114.tsv` (the facts) and
   `<crate>/tests/generated/abi_checks.rs` (one check per fact, included
   by `tests/abi.rs`).

Only the Python standard library and a C++ compiler are needed. The probe
source is never written into the repository. Items in `ext.rs` below the
line `// abi-probe: not-vendored` are skipped (their headers are not part of
the vendored set).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

NOT_VENDORED_MARKER = '// abi-probe: not-vendored'
RUST_FILES = ['pjrt.rs', 'ext.rs', 'ffi.rs']
TSV_NAME = 'pjrt-0.114.tsv'
# Rust-only items (not part of any C header).
RUST_ONLY = {'PjrtEntry', 'PJRT_API_ENTRIES'}
# Field names that Rust spells as raw identifiers (`r#type`).
RAW_IDENTS = set()
GEN_RS = os.path.join('tests', 'generated', 'abi_checks.rs')


# --------------------------------------------------------------------------
# Rust side
# --------------------------------------------------------------------------

def strip_rust_comments(text):
    out = []
    for line in text.split('\n'):
        s = line.strip()
        if s.startswith('//') or s.startswith('#['):
            continue
        out.append(line)
    return '\n'.join(out)


def split_top_level(body):
    """Split on commas that are not nested in (), [], <> or {}."""
    body = body.replace('->', '\x01')  # keep '>' of arrows out of the depth count
    parts, depth, cur = [], 0, ''
    for ch in body:
        if ch in '([<{':
            depth += 1
        elif ch in ')]>}':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    parts.append(cur)
    return [p.strip().replace('\x01', '->') for p in parts if p.strip()]


def parse_rust(crate):
    """Return dict with the items declared in the crate, in source order."""
    items = {'structs': [], 'unions': {}, 'opaque': [], 'consts': [],
             'sizes': [], 'aliases': [], 'enum_aliases': set()}
    for fname in RUST_FILES:
        text = open(os.path.join(crate, 'src', fname)).read()
        if NOT_VENDORED_MARKER in text:
            text = text.split(NOT_VENDORED_MARKER)[0]
        code = strip_rust_comments(text)
        for m in re.finditer(r'pub (struct|union) (\w+) \{(.*?)\n\}', code, re.S):
            kind, name, body = m.group(1), m.group(2), m.group(3)
            if name in RUST_ONLY:
                continue
            fields = []
            for part in split_top_level(body):
                fm = re.match(r'(?:pub )?(r#)?(\w+)\s*:\s*(.*)$', part, re.S)
                if not fm:
                    raise SystemExit('cannot parse field %r of %s' % (part, name))
                if fm.group(1):
                    RAW_IDENTS.add(fm.group(2))
                fields.append((fm.group(2), re.sub(r'\s+', ' ', fm.group(3)).strip()))
            if len(fields) == 1 and fields[0][0] == '_opaque':
                items['opaque'].append(name)
            elif kind == 'union':
                items['unions'][name] = fields
                items['structs'].append((name, fields, 'union'))
            else:
                items['structs'].append((name, fields, 'struct'))
        for m in re.finditer(r'pub const (\w+)\s*:\s*([\w:]+)\s*=\s*([^;]+);', code):
            name, ty = m.group(1), m.group(2)
            if name.endswith('_STRUCT_SIZE') or ty.startswith('['):
                continue
            items['consts'].append((name, ty))
        for m in re.finditer(r'struct_size!\(\s*(\w+)\s*=\s*(\w+)\s*,\s*(?:r#)?(\w+)\s*:', code):
            items['sizes'].append((m.group(2), m.group(1), m.group(3)))
        for m in re.finditer(r'pub type (\w+)\s*=\s*([^;]+);', code, re.S):
            name, rhs = m.group(1), re.sub(r'\s+', ' ', m.group(2)).strip()
            if 'fn(' in rhs or rhs.startswith('Option<'):
                continue
            items['aliases'].append((name, rhs))
            if rhs in ('i32', 'u32', 'i64', 'u8'):
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


def gen_rust(rows, items):
    out = ['// @generated by tools/abi-probe from abi/%s; do not edit by hand.' % TSV_NAME,
           '// Included by tests/abi.rs: one check per row of the facts table.', '{']
    unions = set(items['unions'])
    for r in rows:
        kind, name, member = r[0], r[1], r[2]
        if kind == 'struct':
            out.append('    check_struct!(%s);' % name)
        elif kind == 'field':
            mac = 'check_union_field' if name in unions else 'check_field'
            out.append('    %s!(%s, %s);' % (mac, name, 'r#' + member if member in RAW_IDENTS else member))
        elif kind == 'slot':
            out.append('    check_slot!(%s);' % member)
        elif kind == 'struct_size':
            out.append('    check_struct_size!(%s, %s_STRUCT_SIZE);' % (name, name))
        elif kind == 'opaque':
            out.append('    check_opaque!(%s);' % name)
        elif kind == 'const':
            out.append('    check_const!(%s);' % name)
        elif kind == 'type':
            out.append('    check_type!(%s);' % name)
        elif kind in ('fieldcount', 'enumcount'):
            out.append('    check_count!(%s, "%s");' % (kind, name))
    out.append('}')
    return '\n'.join(out) + '\n'


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('vendor', help='directory holding xla/pjrt/c/pjrt_c_api.h')
    ap.add_argument('--crate', default=os.path.join(root, 'crates', 'rpjrt-sys'))
    ap.add_argument('--cxx', default=os.environ.get('CXX', 'g++'))
    ap.add_argument('--keep-probe', help='also copy the probe source to this directory (outside the repo)')
    a = ap.parse_args()

    vendor = os.path.abspath(a.vendor)
    if not os.path.exists(os.path.join(vendor, 'xla', 'pjrt', 'c', 'pjrt_c_api.h')):
        raise SystemExit('%s does not contain xla/pjrt/c/pjrt_c_api.h' % vendor)
    items = parse_rust(a.crate)
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
    gen_path = os.path.join(a.crate, GEN_RS)
    os.makedirs(os.path.dirname(gen_path), exist_ok=True)
    with open(gen_path, 'w') as f:
        f.write(gen_rust(rows, items))
    kinds = {}
    for r in rows:
        kinds[r[0]] = kinds.get(r[0], 0) + 1
    print('wrote %s (%d rows: %s)' % (os.path.relpath(tsv_path, root), len(rows),
                                     ', '.join('%s %d' % kv for kv in sorted(kinds.items()))))
    print('wrote %s' % os.path.relpath(gen_path, root))


if __name__ == '__main__':
    main()
