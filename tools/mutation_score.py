"""Mutation score per module from a finished `mutmut run` (run in its scratch folder): killed / all, survivors listed.

Timeouts count as killed (the mutant made the tests hang, which a run would notice); "not checked"
mutants are reported apart and make the score incomplete.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def main() -> int:
    out = subprocess.run([str(BIN / "mutmut"), "results", "--all", "true"], capture_output=True, text=True).stdout
    by_module: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    survivors: dict[str, list[str]] = collections.defaultdict(list)
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if not name:
            continue
        module = name.split(".x", 1)[0] if ".x" in name else name.rsplit(".", 1)[0]
        by_module[module][status] += 1
        if status == "survived":
            survivors[module].append(name)
    worst = 100.0
    for module, c in sorted(by_module.items()):
        total = sum(c.values())
        killed = c["killed"] + c["timeout"]
        score = 100.0 * killed / total if total else 0.0
        worst = min(worst, score)
        extra = f", {c['not checked']} not checked" if c["not checked"] else ""
        print(f"{module}: mutation score {score:.0f}% ({killed} of {total} killed, {c['survived']} survived{extra})")
        for name in survivors[module]:
            diff = subprocess.run([str(BIN / "mutmut"), "show", name], capture_output=True, text=True).stdout
            changed = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
            print(f"  survived {name.split('__mutmut_')[0].split('.')[-1]} #{name.rsplit('_', 1)[-1]}: "
                  + " | ".join(ln.strip() for ln in changed))
    return 0 if by_module and worst >= 80 else 1


if __name__ == "__main__":
    sys.exit(main())
