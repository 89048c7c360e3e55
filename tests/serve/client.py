"""The official `openai` client (PyPI) against `cyb-llm serve`, for tests/serve_openai.rs.

usage: client.py SCENARIO BASE_URL < ARGS.json   (prints one JSON document)

Each scenario does what a user's application would do with the client and
prints what came back; the Rust test compares it with the CLI's own output.
"""
import asyncio
import json
import sys
import time

import httpx2 as httpx  # the HTTP client the openai package itself uses
import openai

SCENARIO, BASE = sys.argv[1], sys.argv[2]
ARGS = json.load(sys.stdin)
KEY = ARGS.get("api_key") or "none"


def client(**kw):
    return openai.OpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0, **kw)


def aclient():
    return openai.AsyncOpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0, timeout=600)


def chat_plain(c, prompt, n):
    r = c.chat.completions.create(model=ARGS["model"], messages=[{"role": "user", "content": prompt}],
                                  temperature=0, max_tokens=n)
    ch = r.choices[0]
    return {"text": ch.message.content, "finish_reason": ch.finish_reason, "role": ch.message.role,
            "usage": r.usage.model_dump(), "object": r.object, "model": r.model}


def chat_stream(c, prompt, n):
    s = c.chat.completions.create(model=ARGS["model"], messages=[{"role": "user", "content": prompt}],
                                  temperature=0, max_tokens=n, stream=True,
                                  stream_options={"include_usage": True})
    text, finish, usage, chunks = "", None, None, 0
    for chunk in s:
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for ch in chunk.choices:
            text += ch.delta.content or ""
            finish = ch.finish_reason or finish
    return {"text": text, "finish_reason": finish, "usage": usage, "chunks": chunks}


async def one_async_stream(c, prompt, n):
    s = await c.chat.completions.create(model=ARGS["model"], messages=[{"role": "user", "content": prompt}],
                                        temperature=0, max_tokens=n, stream=True)
    text = ""
    async for chunk in s:
        for ch in chunk.choices:
            text += ch.delta.content or ""
    return text


def status_of(fn):
    try:
        fn()
        return {"status": 200}
    except openai.APIStatusError as e:
        return {"status": e.status_code, "body": e.body, "retry_after": e.response.headers.get("retry-after")}


def raw(method, path, **kw):
    r = httpx.request(method, BASE + path, timeout=60, **kw)
    try:
        body = r.json()
    except ValueError:
        body = r.text
    return {"status": r.status_code, "body": body, "retry_after": r.headers.get("retry-after")}


def main():
    out = {}
    if SCENARIO == "models":
        out["ids"] = [m.id for m in client().models.list().data]
    elif SCENARIO == "chat":
        c = client()
        out["plain"] = [chat_plain(c, p, ARGS["max_tokens"]) for p in ARGS["prompts"]]
        out["stream"] = [chat_stream(c, p, ARGS["max_tokens"]) for p in ARGS["prompts"]]
        r = c.completions.create(model=ARGS["model"], prompt=ARGS["raw_prompt"], temperature=0,
                                 max_tokens=ARGS["max_tokens"])
        out["completion"] = {"text": r.choices[0].text, "finish_reason": r.choices[0].finish_reason,
                             "usage": r.usage.model_dump()}
    elif SCENARIO == "concurrent":
        async def run():
            c = aclient()
            return await asyncio.gather(*[one_async_stream(c, p, ARGS["max_tokens"]) for p in ARGS["prompts"]])
        out["texts"] = asyncio.run(run())
    elif SCENARIO == "embeddings":
        c = client()
        out["default"] = [d.embedding for d in c.embeddings.create(model=ARGS["model"], input=ARGS["texts"]).data]
        r = c.embeddings.create(model=ARGS["model"], input=ARGS["texts"], encoding_format="float")
        out["float"] = [d.embedding for d in r.data]
        out["usage"] = r.usage.model_dump()
        out["one"] = c.embeddings.create(model=ARGS["model"], input=ARGS["texts"][0]).data[0].embedding
    elif SCENARIO == "transcribe":
        c = client()
        with open(ARGS["file"], "rb") as f:
            out["json"] = c.audio.transcriptions.create(model=ARGS["model"], file=f).text
        with open(ARGS["file"], "rb") as f:
            out["text"] = c.audio.transcriptions.create(model=ARGS["model"], file=f, response_format="text")
        with open(ARGS["file"], "rb") as f:
            out["srt"] = c.audio.transcriptions.create(model=ARGS["model"], file=f, response_format="srt")
        with open(ARGS["file"], "rb") as f:
            out["vtt"] = c.audio.transcriptions.create(model=ARGS["model"], file=f, response_format="vtt")
        with open(ARGS["file"], "rb") as f:
            v = c.audio.transcriptions.create(model=ARGS["model"], file=f, response_format="verbose_json")
            out["verbose"] = v.model_dump()
    elif SCENARIO == "errors":
        c, m = client(), ARGS["model"]
        msgs = [{"role": "user", "content": "hi"}]
        out["unknown_model"] = status_of(lambda: c.chat.completions.create(model="nope", messages=msgs))
        out["wrong_kind"] = status_of(lambda: c.embeddings.create(model=m, input="hi"))
        out["bad_temperature"] = status_of(lambda: c.chat.completions.create(model=m, messages=msgs, temperature=-1))
        out["bad_top_p"] = status_of(lambda: c.chat.completions.create(model=m, messages=msgs, top_p=1.5))
        out["n_2"] = status_of(lambda: c.chat.completions.create(model=m, messages=msgs, n=2))
        out["long_prompt"] = status_of(lambda: c.chat.completions.create(
            model=m, messages=[{"role": "user", "content": "word " * ARGS["long_words"]}], max_tokens=4))
        out["malformed"] = raw("POST", "/v1/chat/completions", content=b"{not json",
                               headers={"content-type": "application/json"})
        out["missing_field"] = raw("POST", "/v1/chat/completions", json={"model": m})
        out["wrong_type"] = raw("POST", "/v1/chat/completions", json={"model": m, "messages": "hi"})
        out["no_route"] = raw("GET", "/v1/nothing")
        out["wrong_method"] = raw("GET", "/v1/chat/completions")
        out["too_large"] = raw("POST", "/v1/embeddings", content=b"x" * ARGS["too_large"],
                               headers={"content-type": "application/json"})
        out["bad_audio"] = raw("POST", "/v1/audio/transcriptions", data={"model": ARGS["speech_model"]},
                               files={"file": ("noise.wav", b"RIFF not a wav file")})
        out["no_file"] = raw("POST", "/v1/audio/transcriptions", data={"model": ARGS["speech_model"]},
                             files={"other": ("x", b"1")})
        out["after"] = chat_plain(c, "hi", 4)
    elif SCENARIO == "auth":
        out["health"] = raw("GET", "/health")
        out["no_key"] = raw("GET", "/v1/models")
        out["wrong_key"] = raw("GET", "/v1/models", headers={"authorization": "Bearer wrong"})
        out["metrics_no_key"] = raw("GET", "/metrics")
        out["with_key"] = [m.id for m in client().models.list().data]
    elif SCENARIO == "busy":
        async def run():
            c = aclient()
            async def one(i):
                try:
                    await c.chat.completions.create(model=ARGS["model"], messages=[{"role": "user", "content": f"Count to {i}"}],
                                                    temperature=0, max_tokens=ARGS["max_tokens"])
                    return {"status": 200}
                except openai.APIStatusError as e:
                    return {"status": e.status_code, "retry_after": e.response.headers.get("retry-after"), "body": e.body}
            return await asyncio.gather(*[one(i) for i in range(ARGS["requests"])])
        out["results"] = asyncio.run(run())
    elif SCENARIO == "load":
        async def run():
            c = aclient()
            sem = asyncio.Semaphore(ARGS["concurrency"])
            audio = open(ARGS["file"], "rb").read()
            async def one(i):
                async with sem:
                    try:
                        kind = "transcribe" if i % 25 == 0 else ("chat", "stream", "embed")[i % 3]
                        if kind == "chat":
                            r = await c.chat.completions.create(model=ARGS["model"], temperature=0, max_tokens=ARGS["max_tokens"],
                                                                messages=[{"role": "user", "content": f"Say {i}"}])
                            ok = r.choices[0].finish_reason in ("stop", "length")
                        elif kind == "stream":
                            s = await c.chat.completions.create(model=ARGS["model"], temperature=0, max_tokens=ARGS["max_tokens"],
                                                                messages=[{"role": "user", "content": f"Name {i}"}], stream=True)
                            finish = None
                            async for chunk in s:
                                for ch in chunk.choices:
                                    finish = ch.finish_reason or finish
                            ok = finish in ("stop", "length")
                        elif kind == "embed":
                            r = await c.embeddings.create(model=ARGS["embed_model"], input=[f"text {i}", "another"])
                            ok = len(r.data) == 2 and len(r.data[0].embedding) > 0
                        else:
                            r = await c.audio.transcriptions.create(model=ARGS["speech_model"], file=("jfk.wav", audio))
                            ok = "country" in r.text
                        return {"kind": kind, "ok": ok}
                    except Exception as e:  # every failure is counted and shown
                        return {"kind": "error", "ok": False, "error": repr(e)}
            t0 = time.time()
            res = await asyncio.gather(*[one(i) for i in range(ARGS["requests"])])
            return res, time.time() - t0
        res, secs = asyncio.run(run())
        out["results"] = res
        out["seconds"] = secs
    elif SCENARIO == "disconnect":
        c = client(timeout=120)
        s = c.chat.completions.create(model=ARGS["model"], messages=[{"role": "user", "content": "Tell a long story."}],
                                      temperature=0, max_tokens=ARGS["max_tokens"], stream=True)
        seen = 0
        for chunk in s:
            seen += 1
            if seen == 3:
                break
        s.close()
        out["read_chunks"] = seen
        out["next"] = chat_plain(c, "hi", 4)
    elif SCENARIO == "give_up_in_queue":
        import threading
        c = client(timeout=120)
        done = {}
        def long_stream():
            s = c.chat.completions.create(model=ARGS["model"], messages=[{"role": "user", "content": "Tell a long story."}],
                                          temperature=0, max_tokens=ARGS["max_tokens"], stream=True)
            done["chunks"] = sum(1 for _ in s)
        first = threading.Thread(target=long_stream)
        first.start()
        time.sleep(0.5)  # the slot is taken
        impatient = client(timeout=0.5)
        try:
            impatient.chat.completions.create(model=ARGS["model"], messages=[{"role": "user", "content": "hi"}], max_tokens=4)
            out["impatient"] = "answered"
        except openai.APITimeoutError:
            out["impatient"] = "timed out"
        time.sleep(1.0)  # the server notices the closed connection
        out["queued_after"] = status_of(lambda: c.chat.completions.create(
            model=ARGS["model"], messages=[{"role": "user", "content": "hi"}], max_tokens=4))
        out["first_still_running"] = first.is_alive() or None
        first.join()
        out["first_chunks"] = done.get("chunks")
    elif SCENARIO == "stream_until_signal":
        c = client(timeout=120)
        s = c.chat.completions.create(model=ARGS["model"], messages=[{"role": "user", "content": ARGS["prompt"]}],
                                      temperature=0, max_tokens=ARGS["max_tokens"], stream=True)
        text, finish, error = "", None, None
        try:
            for chunk in s:
                for ch in chunk.choices:
                    if not text and ch.delta.content:
                        print("started", file=sys.stderr, flush=True)
                    text += ch.delta.content or ""
                    finish = ch.finish_reason or finish
        except openai.APIError as e:  # the server cut the stream at the end of its grace period
            error = str(e)
        out = {"text": text, "finish_reason": finish, "error": error}
        try:
            httpx.get(BASE + "/health", timeout=5)
            out["after"] = "still up"
        except httpx.HTTPError:
            out["after"] = "refused"
    else:
        raise SystemExit(f"unknown scenario {SCENARIO}")
    json.dump(out, sys.stdout)


main()
