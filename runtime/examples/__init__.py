"""The bundled example registry: the default value of `AGENTS`."""

from runtime.examples.ops import billing, ops

AGENTS = [ops, billing]
