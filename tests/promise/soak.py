"""The promise's model for as long as asked: `python3 scripts/dev.py soak --steps N --seed S`.

Runs the state machine of `tests.promise.machine` in batches of sequences until `--steps` steps
have run (the steps of shrinking a failing sequence included), each batch seeded from `--seed`,
so that an operator can run it against a release and rerun what it found. A violation already
filed (`KNOWN`) is counted and the batch goes on; a new one ends its batch with the minimal
sequence Hypothesis shrank it to, printed above the summary, and the next batch begins.

The summary ends with `violations: N`, the sequences that broke the promise (known or not);
the exit code is 1 when N > 0.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from hypothesis import HealthCheck, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.promise import machine

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dev.py soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="steps to run (default 2000)")
    parser.add_argument("--seed", type=int, default=None, help="the first batch's seed")
    parser.add_argument(
        "--sequence-steps", type=int, default=30, help="longest sequence (default 30 steps)"
    )
    args = parser.parse_args(argv)
    first = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"soak: {args.steps} steps, seed {first}", flush=True)
    started = time.monotonic()
    batch = 0
    try:
        while machine.STATS.steps < args.steps:
            left = args.steps - machine.STATS.steps
            if not run_batch(first + batch, left, args.sequence_steps):
                print(f"(rerun that batch alone: --seed {first + batch})", flush=True)
            batch += 1
    finally:
        machine.close_session()
    stats = machine.STATS
    print(stats.summary())
    for line in stats.found:
        print(f"new violation: {line}")
    print(f"seconds: {time.monotonic() - started:.0f}")
    print(f"violations: {stats.broken}")
    return 1 if stats.broken else 0


def run_batch(batch_seed: int, steps: int, sequence_steps: int) -> bool:
    """One batch of sequences of about `steps` steps in all; False when it found a new
    violation (printed, with its minimal sequence)."""

    class Seeded(machine.PromiseMachine):
        pass

    seed(batch_seed)(Seeded)
    try:
        run_state_machine_as_test(
            Seeded,
            settings=settings(
                max_examples=max(1, -(-steps // sequence_steps)),
                stateful_step_count=min(sequence_steps, steps),
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except AssertionError as error:
        # The minimal sequence is in the error's notes (Hypothesis's "Falsifying example").
        notes = "\n".join(getattr(error, "__notes__", []))
        print(f"batch {batch_seed}: {error}\n{notes}", flush=True)
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
