"""Counts of a lowered JAX step's GEMMs and scatters, from its StableHLO text.

Tests lower (do not compile) a training step and read which dtypes its
`dot_general`s take and which scatters it holds: a float32 GEMM under a
bfloat16 policy runs at a fraction of the tensor cores' rate, and a bfloat16
scatter-add is a compare-and-swap loop on a GPU.
"""

import collections
import re
from typing import Dict, List, Tuple

# One op per line in both the pretty ("%0 = stablehlo.dot_general %a, ...")
# and the generic ('%0 = "stablehlo.dot_general"(%a, ...)') forms; the
# operand and result types close the line.
_OP = re.compile(r'^\s*(?:%\S+(?:, %\S+)* = )?"?(?:stablehlo|mhlo)\.'
                 r'([a-z_0-9]+)"?')
_TYPES = re.compile(r"tensor<(?:[0-9?]+x)*([a-z]+[0-9]*)>")


def _signature(line: str) -> Tuple[List[str], List[str]]:
  """(operand dtypes, result dtypes) of an op's trailing type signature."""
  sig = line.rsplit(" : ", 1)[-1]
  if "->" in sig:
    ins, outs = sig.split("->", 1)
    return _TYPES.findall(ins), _TYPES.findall(outs)
  types = _TYPES.findall(sig)
  return types, types


def count_ops(text: str) -> Dict[str, Dict[str, int]]:
  """`dot_general` keyed "lhs,rhs->out" dtypes, `scatter` keyed by result."""
  dots, scatters = collections.Counter(), collections.Counter()
  open_scatter = False
  for line in text.splitlines():
    if open_scatter and line.lstrip().startswith("})"):
      # The generic form's scatter closes its region with its signature.
      scatters[(_signature(line)[1] or ["?"])[0]] += 1
      open_scatter = False
    match = _OP.match(line)
    if not match:
      continue
    ins, outs = _signature(line)
    if match.group(1) == "scatter":
      if "->" in line:
        scatters[(outs or ["?"])[0]] += 1
      else:
        open_scatter = True
    elif match.group(1) == "dot_general" and len(ins) >= 2 and outs:
      dots[f"{ins[0]},{ins[1]}->{outs[0]}"] += 1
  return dict(dot_general=dict(dots), scatter=dict(scatters))
