"""Where a rollout program's time goes: a Perfetto trace of one call, its executed thunks
(XLA CPU kernels) summed per HLO computation (the scan bodies, the solver's while loops),
then per kernel kind and output size within the busiest ones.

    python benchmarks/trace_profile.py humanoid implicit --steps 10
    python benchmarks/trace_profile.py ant forward --top 3
    python benchmarks/trace_profile.py humanoid implicit --by-source 2

``--by-source K`` attributes each busy computation's thunks to the mjx_lite source lines
that emitted them (the compiled HLO's stack frames, K innermost mjx_lite frames per line):
a transposed operation carries its primal's location, so this says which forward code the
backward's kernels come from.

Programs as ``grad.py`` builds them, batch 1, float32, ``--iterations 1 --solver NEWTON``:
``forward`` (the fixed-iteration rollout), ``fwd-implicit`` (the implicit adjoint's forward)
and ``implicit`` (its gradient w.r.t. the controls). Traced durations carry the profiler's
cost per thunk (a 10-step humanoid gradient runs ~3x slower traced), so compare counts
freely and durations only between kernels of like size; time changes with ``ab.py``.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import math
import pathlib
import re
import tempfile

import jax
from grad import _inputs, _named_programs, mjx_lite_programs
from run import _model_path, add_xla_argument, use_xla_argument, xla_options

import mjx_lite

_DEF = re.compile(r"\s+(?:ROOT )?%?([\w.\-]+) = (\(?[a-z0-9]+\[[\d,]*\]\S*)")
_COMP = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$")
_SIZES = (64, 512, 4096, 20000)


def _events(fn, args, out: pathlib.Path) -> tuple[collections.Counter, collections.Counter]:
    jax.block_until_ready(fn(*args))
    jax.profiler.start_trace(str(out), create_perfetto_trace=True)
    jax.block_until_ready(fn(*args))
    jax.profiler.stop_trace()
    path = glob.glob(str(out / "**" / "*.json.gz"), recursive=True)[0]
    trace = json.load(gzip.open(path))
    count, dur = collections.Counter(), collections.Counter()
    for e in trace["traceEvents"] if isinstance(trace, dict) else trace:
        if e.get("ph") == "X":
            count[e["name"]] += 1
            dur[e["name"]] += e.get("dur", 0)
    return count, dur


def _instructions(hlo: str) -> dict:
    """instruction name -> (computation, largest output size, its line of HLO text)."""
    out, comp = {}, None
    for line in hlo.splitlines():
        head = _COMP.match(line)
        if head:
            comp = head.group(1)
            continue
        inst = _DEF.match(line)
        if inst and comp:
            dims = re.findall(r"\[([\d,]*)\]", inst.group(2))
            size = max((math.prod(int(x) for x in d.split(",") if x) for d in dims), default=1)
            out[inst.group(1)] = (comp, size, line.strip())
    return out


def _source_lines(hlo: str, depth: int) -> dict:
    """instruction name -> "file:function:line < caller..." (``depth`` innermost mjx_lite
    frames) from the StackFrames table of the compiled HLO text; "?" where it has none."""
    tables = {"FileNames": {}, "FunctionNames": {}, "FileLocations": {}, "StackFrames": {}}
    section = None
    for line in hlo.splitlines():
        text = line.strip()
        if text in tables:
            section = tables[text]
            continue
        head = re.match(r"^(\d+) (.*)$", text)
        if section is None or not head:
            section = None if text.startswith(("%", "ENTRY", "ROOT", "HloModule")) else section
            continue
        key, value = int(head.group(1)), head.group(2)
        section[key] = (dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", value))
                        if value.startswith("{") else value.strip('"'))
    ours = {p.name for p in pathlib.Path(mjx_lite.__file__).parent.rglob("*.py")}

    def frames(frame_id):
        out, seen = [], set()
        while frame_id > 0 and frame_id not in seen and len(out) < depth:
            seen.add(frame_id)
            frame = tables["StackFrames"].get(frame_id)
            if frame is None:
                break
            loc = tables["FileLocations"][frame["file_location_id"]]
            name = pathlib.Path(tables["FileNames"][loc["file_name_id"]]).name
            if name in ours:
                out.append(f"{name}:{tables['FunctionNames'][loc['function_name_id']]}:"
                           f"{loc['line']}")
            # parent ids count from 1, 0 meaning none
            frame_id = frame.get("parent_frame_id", 0) - 1
        return " < ".join(out) or "?"

    out = {}
    for line in hlo.splitlines():
        inst = re.match(r"\s+(?:ROOT )?%?([\w.\-]+) = .*stack_frame_id=(\d+)", line)
        if inst:
            out[inst.group(1)] = frames(int(inst.group(2)))
    return out


def _bucket(size: int) -> str:
    return next((f"<={s}" for s in _SIZES if size <= s), f">{_SIZES[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("program", choices=("forward", "fwd-implicit", "implicit"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=4, help="computations broken down")
    parser.add_argument("--by-source", type=int, default=0, metavar="K",
                        help="also attribute thunks to source lines, K frames deep")
    parser.add_argument("--kernels", type=int, default=0, metavar="N",
                        help="also list the N thunks of the busiest computation with the most "
                             "traced time, with their HLO instruction")
    add_xla_argument(parser)
    a = parser.parse_args()
    print(use_xla_argument(a))

    m, d, forward, grad = mjx_lite_programs(mjx_lite, _model_path(a.model), a.steps, 1,
                                            "NEWTON")
    db, ctrls = _inputs(m, d, 1, a.steps)
    program = _named_programs(forward, grad)[a.program]
    compiled = jax.jit(program).lower(db, ctrls).compile(compiler_options=xla_options() or None)
    with tempfile.TemporaryDirectory() as tmp:
        count, dur = _events(compiled, (db, ctrls), pathlib.Path(tmp))
    hlo = compiled.as_text()
    where = _instructions(hlo)
    source = _source_lines(hlo, a.by_source) if a.by_source else {}

    per_comp, per_comp_us = collections.Counter(), collections.Counter()
    for name, n in count.items():
        if name in where:
            per_comp[where[name][0]] += n
            per_comp_us[where[name][0]] += dur[name]
    print(f"{a.model} {a.program}, {a.steps} steps: {sum(per_comp.values())} thunks")
    for comp, n in per_comp.most_common(12):
        print(f"  {n:8d} thunks {per_comp_us[comp] / 1e3:8.1f} ms traced  {comp[:70]}")
    for comp, _ in per_comp.most_common(a.top):
        kinds, kinds_us = collections.Counter(), collections.Counter()
        sizes, sizes_us = collections.Counter(), collections.Counter()
        for name, n in count.items():
            if where.get(name, (None,))[0] != comp:
                continue
            stem = re.sub(r"\.\d+$", "", name)
            kind = stem.split("_")[-1] if "fusion" in stem else stem
            kinds[kind] += n
            kinds_us[kind] += dur[name]
            size = _bucket(where[name][1])
            sizes[size] += n
            sizes_us[size] += dur[name]
        print(f"\n{comp[:70]}")
        for kind, us in kinds_us.most_common(8):
            print(f"  {kinds[kind]:8d} {kind:20s} {us / 1e3:8.2f} ms traced")
        for size in [f"<={s}" for s in _SIZES] + [f">{_SIZES[-1]}"]:
            if sizes[size]:
                print(f"  output {size:>7s}: {sizes[size]:7d} thunks, "
                      f"{sizes_us[size] / sizes[size]:5.2f} us traced each")
        if source:
            lines, lines_us = collections.Counter(), collections.Counter()
            for name, n in count.items():
                if where.get(name, (None,))[0] == comp:
                    lines[source.get(name, "?")] += n
                    lines_us[source.get(name, "?")] += dur[name]
            for line, n in lines.most_common(20):
                print(f"  {n:8d} thunks {lines_us[line] / 1e3:8.2f} ms traced  {line}")
    if a.kernels:
        comp = per_comp.most_common(1)[0][0]
        mine = [name for name in count if where.get(name, (None,))[0] == comp]
        print(f"\n{comp[:70]}: the {a.kernels} thunks with the most traced time")
        for name in sorted(mine, key=lambda k: -dur[k])[:a.kernels]:
            print(f"  {dur[name] / 1e3:7.2f} ms {count[name]:5d}x  {source.get(name, '')}\n"
                  f"      {where[name][2][:160]}")


if __name__ == "__main__":
    main()
