"""The bundled example registry: the default value of `AGENTS`."""

from runtime.examples.ops import billing, ops
from runtime.examples.shell import shell

AGENTS = [ops, billing, shell]
