"""The bundled example registry: the default value of `AGENTS`.

Floor 6 (a run): imports `runtime.tools` beside it.
"""

from runtime.examples.ops import billing, ops
from runtime.examples.shell import shell

AGENTS = [ops, billing, shell]
