#!/usr/bin/env python3
"""Lists the imports of a WebAssembly module, one `module.name kind` per line.

Usage: wasm-imports.py FILE [--expect-none | --expect FILE_WITH_EXPECTED_LINES]
Exits 1 when the expectation does not hold.
"""
import sys


def leb(data, i):
    result, shift = 0, 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, i


def name(data, i):
    n, i = leb(data, i)
    return data[i:i + n].decode(), i + n


def imports(path):
    data = open(path, "rb").read()
    if data[:4] != b"\0asm":
        sys.exit(f"{path}: not a WebAssembly module")
    i, out = 8, []
    kinds = {0: "func", 1: "table", 2: "memory", 3: "global", 4: "tag"}
    while i < len(data):
        sid = data[i]
        size, j = leb(data, i + 1)
        if sid == 2:
            count, k = leb(data, j)
            for _ in range(count):
                mod, k = name(data, k)
                field, k = name(data, k)
                kind = data[k]
                k += 1
                out.append(f"{mod}.{field} {kinds.get(kind, kind)}")
                if kind == 0:
                    _, k = leb(data, k)
                elif kind == 1:
                    k += 1
                    flags, k = leb(data, k)
                    _, k = leb(data, k)
                    if flags & 1:
                        _, k = leb(data, k)
                elif kind == 2:
                    flags, k = leb(data, k)
                    _, k = leb(data, k)
                    if flags & 1:
                        _, k = leb(data, k)
                elif kind == 3:
                    k += 2
                elif kind == 4:
                    k += 1
                    _, k = leb(data, k)
        i = j + size
    return out


def main():
    path = sys.argv[1]
    found = imports(path)
    for line in found:
        print(line)
    if "--expect-none" in sys.argv and found:
        sys.exit(f"{path}: expected no imports, found {len(found)}")
    if "--expect" in sys.argv:
        want = [l.strip() for l in open(sys.argv[sys.argv.index("--expect") + 1]) if l.strip() and not l.startswith("#")]
        if sorted(want) != sorted(found):
            sys.exit(f"{path}: imports differ from the expected list\n  expected: {sorted(want)}\n  found:    {sorted(found)}")
    print(f"{path}: {len(found)} imports", file=sys.stderr)


if __name__ == "__main__":
    main()
