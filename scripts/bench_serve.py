"""Load client for scripts/bench-serve.sh: REQUESTS chat completions at CONCURRENCY
against an OpenAI-compatible server (cyb-llm serve or llama-server), with the
official openai client. Prints one JSON line: generated tokens, wall seconds,
aggregate tok/s, p50/p99 request latency, and the server's own decode tok/s
(llama-server's `timings.predicted_per_second`, which both servers report).

usage: bench_serve.py BASE_URL MODEL CONCURRENCY REQUESTS MAX_TOKENS
"""
import asyncio
import json
import statistics
import sys
import time

import openai

base, model, conc, total, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
TOPICS = ["the sea", "a city at night", "winter", "a library", "the moon", "a garden", "trains", "coffee"]


async def main():
    c = openai.AsyncOpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=600)
    sem = asyncio.Semaphore(conc)
    lat, tokens, decode = [], 0, []

    async def one(i):
        nonlocal tokens
        async with sem:
            t0 = time.perf_counter()
            r = await c.chat.completions.with_raw_response.create(
                model=model, temperature=0, max_tokens=max_tokens,
                messages=[{"role": "user", "content": f"Write a long story about {TOPICS[i % len(TOPICS)]}."}])
            lat.append(time.perf_counter() - t0)
            body = json.loads(r.text)
            tokens += body["usage"]["completion_tokens"]
            t = body.get("timings") or {}
            if t.get("predicted_per_second"):
                decode.append(t["predicted_per_second"])

    await one(0)  # warm-up, not counted
    lat.clear(); decode.clear(); tokens = 0
    t0 = time.perf_counter()
    await asyncio.gather(*[one(i) for i in range(total)])
    wall = time.perf_counter() - t0
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(round(p * (len(lat) - 1))))]
    print(json.dumps({
        "concurrency": conc, "requests": total, "tokens": tokens, "seconds": wall,
        "tok_s": tokens / wall, "p50_s": q(0.5), "p99_s": q(0.99),
        "server_decode_tok_s": statistics.mean(decode) if decode else None,
    }))


asyncio.run(main())
