"""What streaming costs a run: Slack calls per run, and the click's path to the tool, with
`STREAMING=off` and `on`, measured on real processes, one run at a time.

    .venv/bin/python -m bench.stream_cost [--runs 20]

A private Redis, a fake Slack and a fake model in this process; the Procfile's `web` and one
`worker` as real processes, started once per setting. Each run asks to delete a user (a card),
is approved, and answers in about `ANSWER_WORDS` words that the model writes over about
`WRITING_SECONDS` (streamed when the run streams; the same answer at once otherwise). Reported:
- Slack Web API calls per run, in all and by method (the warm-up run not counted);
- decision -> tool ran: the decision's Redis time (its script audits it) to the `executed`
  entry's (the tool is instant): what an approval waits for before its tool runs;
- the appends of a streaming run and the longest time between two of them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import statistics
from typing import Any

from bench.harness import decision_to_ms, deployment, header, report
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, message, tool_call

ANSWER_WORDS = 60
WRITING_SECONDS = 2.0
ANSWER = " ".join(f"word{n}" for n in range(ANSWER_WORDS)) + "."


def delete_then_write(request: ModelRequest) -> list[dict[str, Any]]:
    if not request.tool_outputs:
        return [tool_call("delete_user", {"user_id": "u-100", "reason": request.task}, "c1")]
    return [message(ANSWER)]


async def measure(runs: int, streaming: str) -> dict[str, Any]:
    async with deployment(STREAMING=streaming) as running:
        running.model.script = delete_then_write
        running.model.pace = WRITING_SECONDS / (len(ANSWER) / 8)  # 8 characters an event
        slack = running.slack
        await approve_and_answer(running, slack.cards()[0])  # the warm-up run
        before = len(slack.calls)
        for n in range(runs):
            count = len(slack.cards())
            await running.sender.command(f"delete u-100 (run {n})")
            await slack.wait_for(lambda: len(slack.cards()) > count, 30, "the card")  # noqa: B023
            await approve_and_answer(running, slack.cards()[-1])
        calls = slack.calls[before:]
        return {
            "calls": calls,
            "per_run": len(calls) / runs,
            "tool_ms": await decision_to_ms(running, b"executed", first=True),
        }


async def approve_and_answer(running: Deployment, card: Any) -> None:
    thread = card.thread_ts
    await running.sender.click(card, "approve", user="UBOB")
    await running.slack.wait_for(lambda: running.slack.final_answers(thread), 30, "the answer")
    await asyncio.sleep(0.5)  # the status's last redraw, and the session's


def describe(streaming: str, result: dict[str, Any], runs: int) -> None:
    by_method = collections.Counter(c.method for c in result["calls"])
    print(f"\n## STREAMING={streaming}")
    print(f"{'Slack calls per run':<40} {result['per_run']:.1f}")
    for method, count in sorted(by_method.items()):
        print(f"  {method:<38} {count / runs:.1f}")
    report("decision -> tool ran", result["tool_ms"])
    appends = [c.at for c in result["calls"] if c.method == "chat.appendStream"]
    if len(appends) > 1:
        gaps = [b - a for a, b in itertools.pairwise(appends) if b - a < 5]
        if gaps:
            print(f"{'shortest gap between two appends':<40} {min(gaps) * 1000:.0f} ms")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    header("streaming's cost", f".venv/bin/python -m bench.stream_cost --runs {args.runs}")
    results = {s: await measure(args.runs, s) for s in ("off", "on")}
    for streaming, result in results.items():
        describe(streaming, result, args.runs)
    off, on = (statistics.median(results[s]["tool_ms"]) for s in ("off", "on"))
    print(f"\nmedian decision -> tool ran, on / off: {on / off:.2f}")
    print(
        f"Slack calls per run, on / off: {results['on']['per_run'] / results['off']['per_run']:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
