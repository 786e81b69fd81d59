#!/usr/bin/env bash
# Checks the layering of server/ (docs/architecture.md): each folder
# includes only from the folders below it, and no include circle joins files
# of different folders. Outside server/, segment/, cache/ and conf/ are
# reached only through their public headers (no internal.h).
#
#   bash scripts/check-layers.sh          exit 0 when clean, 1 with a list
#   bash scripts/check-layers.sh DIR      check the tree at DIR instead
#
# Ranks, low to high: base, net, http, handler, server.c/server.h and
# server_view.c, control, main.c. An include may point at the same rank
# (within a folder) or lower.
set -uo pipefail
top=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$top" || exit 2

python3 - <<'PY'
import os, re, sys

RANKS = {"base": 0, "net": 1, "http": 2, "handler": 3, "top": 4, "control": 5, "main": 6}

def layer(path):
    """The layer of a file under server/, or None outside server/."""
    parts = path.split("/")
    if parts[0] != "server":
        return None
    if len(parts) == 2:
        return "main" if parts[1] == "main.c" else "top"
    return parts[1]

inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
files = []
for root in ("server", "cache", "segment", "conf"):
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith((".c", ".h")):
                files.append(os.path.join(d, n))

problems = []
edges = {}
for f in sorted(files):
    lf = layer(f)
    text = open(f, encoding="utf-8", errors="replace").read()
    for inc in inc_re.findall(text):
        if not os.path.exists(inc):
            continue  # a system or generated header
        edges.setdefault(f, set()).add(inc)
        li = layer(inc)
        if lf is None:
            if li is not None:
                problems.append(f"{f}: includes {inc}: a module outside server/ reaches into it")
            continue
        if li is None:
            if inc.endswith("internal.h") or inc.endswith("_internal.h"):
                problems.append(f"{f}: includes {inc}: not a public header of its module")
            continue
        if lf not in RANKS or li not in RANKS:
            problems.append(f"{f}: includes {inc}: folder not in the layer list")
            continue
        if RANKS[li] > RANKS[lf]:
            problems.append(f"{f}: includes {inc}: {li}/ is above {lf}/")

# Include circles: strongly connected components of the include graph
# (Tarjan); a component whose files lie in more than one folder is a
# circle between folders.
index, low, stack, on, comps = {}, {}, [], set(), []
counter = [0]
sys.setrecursionlimit(10000)

def strong(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, ()):
        if w not in index:
            strong(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        comps.append(comp)

for v in sorted(edges):
    if v not in index:
        strong(v)
for comp in comps:
    dirs = {os.path.dirname(f) for f in comp}
    if len(comp) > 1 and len(dirs) > 1:
        problems.append("include circle across folders: " + " ".join(sorted(comp)))

for p in problems:
    print("check-layers: " + p)
if problems:
    print(f"check-layers: {len(problems)} problem(s)")
    sys.exit(1)
print(f"check-layers: {len(files)} files, layering clean")
PY
