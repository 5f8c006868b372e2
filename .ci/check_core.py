"""CI, on the core install (.venv-core): no torch, no scikit-learn, and `rerank --help` loads neither.

Prints the start-up times: `import rerank`, and `rerank --help` (every command's parser, so every
command plug-in loaded), each the best of three runs in a fresh interpreter.
"""

import importlib.util
import subprocess
import sys
import time

NEURAL = ("torch", "sklearn")

for module in NEURAL:
    if importlib.util.find_spec(module) is not None:
        sys.exit(f"the core install has {module}: a dependency of the core pulls it in")

CHECK = ("import sys, rerank.cli; rerank.cli.build_parser(); "
         f"loaded = {set(NEURAL)!r} & set(sys.modules); assert not loaded, f'rerank --help loads {{loaded}}'")
subprocess.run([sys.executable, "-c", CHECK], check=True)


def best_of_three(args: list[str]) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times)


print(f"core install: no {', '.join(NEURAL)}; `python -c 'import rerank'` "
      f"{best_of_three([sys.executable, '-c', 'import rerank']):.2f} s, `rerank --help` "
      f"{best_of_three([sys.executable, '-m', 'rerank', '--help']):.2f} s")
