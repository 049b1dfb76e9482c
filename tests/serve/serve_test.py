"""End-to-end test of `memra serve` on the CPU plugin and the default model: the official
openai client, 32 concurrent greedy clients against their solo runs, cancellation on
disconnect, deadlines, >= 30 bad requests, slow clients, admission control and graceful
shutdown. Usage: serve_test.py MEMRA_SERVE_BINARY PLUGIN_SO"""
import json
import os
import random
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_harness import Server, check, fail  # noqa: E402

KEY = "sk-memra-test-4f1c"
AUTH = {"Authorization": "Bearer " + KEY}
MAX_BODY = 65536
MAX_PROMPT = 300


QUICK = False  # --quick: fewer and shorter requests (the sanitizer build is ~8x slower)
T_SECTION = [time.time()]


def section(name):
    now = time.time()
    print("   (%.1f s)\n== %s" % (now - T_SECTION[0], name), flush=True)
    T_SECTION[0] = now


def test_openai_client(srv):
    section("openai client: completions, chat, streams, models, logprobs")
    import openai
    client = openai.OpenAI(base_url=srv.url() + "/v1", api_key=KEY, max_retries=0, timeout=120)
    models = client.models.list()
    check([m.id for m in models.data] == ["SmolLM2-135M-Instruct.Q4_1"],
          "models: %r" % [m.id for m in models.data])
    model = models.data[0].id

    c = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8,
                                  temperature=0)
    check(c.object == "text_completion" and len(c.choices) == 1, "completion shape")
    check(c.choices[0].text.strip() != "", "empty completion")
    u = c.usage
    check(u.prompt_tokens == 5 and 1 <= u.completion_tokens <= 8 and
          u.total_tokens == u.prompt_tokens + u.completion_tokens, "completion usage %r" % u)
    check(c.choices[0].finish_reason in ("length", "stop"), "finish_reason")

    for kind in ("completion", "chat"):
        for seed in ((7,) if QUICK else (7, 1234)):
            kw = dict(model=model, max_tokens=10 if QUICK else 24, temperature=0.9, top_p=0.95, seed=seed)
            if kind == "chat":
                msgs = [{"role": "system", "content": "You are terse."},
                        {"role": "user", "content": "Name three colours."}]
                whole = client.chat.completions.create(messages=msgs, **kw)
                text = whole.choices[0].message.content
                check(whole.choices[0].message.role == "assistant", "chat role")
                chunks = list(client.chat.completions.create(messages=msgs, stream=True, **kw))
                streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks
                                   if ch.choices)
                check(chunks[0].choices[0].delta.role == "assistant", "first chunk role")
            else:
                whole = client.completions.create(prompt="Once upon a time", **kw)
                text = whole.choices[0].text
                chunks = list(client.completions.create(prompt="Once upon a time", stream=True,
                                                        **kw))
                streamed = "".join(ch.choices[0].text for ch in chunks if ch.choices)
            check(text != "", "%s seed %d: empty text" % (kind, seed))
            check(streamed == text, "%s seed %d: streamed %r != whole %r" % (kind, seed,
                                                                             streamed, text))
            last = chunks[-1]
            check(last.choices[0].finish_reason == whole.choices[0].finish_reason,
                  "stream finish_reason")
            check(last.usage is not None and last.usage.completion_tokens ==
                  whole.usage.completion_tokens and last.usage.prompt_tokens ==
                  whole.usage.prompt_tokens, "stream usage %r vs %r" % (last.usage, whole.usage))

    # Different seeds at a high temperature should not all agree (sampling is seeded).
    outs = {client.completions.create(model=model, prompt="My favourite", max_tokens=12,
                                      temperature=1.5, seed=s).choices[0].text for s in range(4)}
    check(len(outs) > 1, "four seeds at temperature 1.5 gave one text: %r" % outs)

    # Logprobs: greedy picks the most likely token, so it heads its own top list.
    lp = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=6, temperature=0,
                                   logprobs=3)
    L = lp.choices[0].logprobs
    check(len(L.tokens) == lp.usage.completion_tokens == len(L.token_logprobs) ==
          len(L.top_logprobs) == len(L.text_offset), "logprobs lengths")
    check("".join(L.tokens) == lp.choices[0].text, "logprob tokens %r vs text %r" %
          (L.tokens, lp.choices[0].text))
    for i, top in enumerate(L.top_logprobs):
        vals = list(top.values())
        check(len(vals) == 3 and all(v <= 0 for v in vals), "top_logprobs %r" % top)
        check(abs(max(vals) - L.token_logprobs[i]) < 1e-6, "greedy token is not the top one")
    chat_lp = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hi"}], max_tokens=4,
        temperature=0, logprobs=True, top_logprobs=2)
    content = chat_lp.choices[0].logprobs.content
    check(len(content) == chat_lp.usage.completion_tokens and
          all(len(t.top_logprobs) == 2 for t in content), "chat logprobs")
    check("".join(t.token for t in content) == chat_lp.choices[0].message.content,
          "chat logprob tokens")

    # Stop strings: the text ends before the stop string and never contains it.
    base = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=12,
                                     temperature=0).choices[0].text
    check(" 7" in base, "expected the count to reach 7: %r" % base)
    for stream in (False, True):
        r = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=12,
                                      temperature=0, stop=[" 7", "zzz"], stream=stream)
        text = "".join(ch.choices[0].text for ch in r if ch.choices) if stream else \
            r.choices[0].text
        check(text == base[:base.index(" 7")], "stop (stream=%s): %r from %r" % (stream, text, base))


def rand_prompts(n, seed):
    rng = random.Random(seed)
    lengths = [1, 2, 3, 5, 8, 13, 17, 24, 31, 40, 47, 60]
    out = []
    for i in range(n):
        L = lengths[i % len(lengths)] + rng.randrange(3)
        ids = [rng.randrange(200, 40000) for _ in range(L)]
        out.append((ids, rng.choice([1, 2, 4, 7, 11, 16])))
    return out


def test_concurrency(srv):
    section("%d concurrent greedy clients == their solo runs; usage; no leaked KV" %
            (16 if QUICK else 32))
    jobs = rand_prompts(16 if QUICK else 32, 20261129)
    m0 = srv.metrics(AUTH)

    def run(ids, max_tokens):
        # logprobs too: every float must match the solo run bit for bit
        st, j = srv.request("POST", "/v1/completions", {"prompt": ids, "max_tokens": max_tokens,
                                                         "temperature": 0, "logprobs": 2}, AUTH)
        check(st == 200, "status %d: %r" % (st, j))
        return j

    solo = [run(ids, mt) for ids, mt in jobs]
    results = [None] * len(jobs)

    def worker(i):
        results[i] = run(*jobs[i])

    t0 = time.time()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.time() - t0
    n_tok = 0
    for i, ((ids, mt), a, b) in enumerate(zip(jobs, solo, results)):
        check(b is not None, "client %d got nothing" % i)
        ua, ub = a["usage"], b["usage"]
        check(ub["prompt_tokens"] == len(ids), "client %d: prompt_tokens %d != %d" %
              (i, ub["prompt_tokens"], len(ids)))
        check(ub["total_tokens"] == ub["prompt_tokens"] + ub["completion_tokens"], "total")
        fr = b["choices"][0]["finish_reason"]
        check(ub["completion_tokens"] == mt if fr == "length" else ub["completion_tokens"] < mt,
              "client %d: %d tokens, finish %s, max %d" % (i, ub["completion_tokens"], fr, mt))
        check(b["choices"][0] == a["choices"][0] and ua == ub,
              "client %d: concurrent %r != solo %r" % (i, b["choices"][0], a["choices"][0]))
        n_tok += ub["completion_tokens"]
    m1 = srv.metrics(AUTH)
    check(m1["memra_kv_blocks_in_use"] == 0, "KV blocks leaked: %g" % m1["memra_kv_blocks_in_use"])
    check(m1["memra_active_sequences"] == 0 and m1["memra_queue_depth"] == 0, "idle gauges")
    d_out = m1["memra_completion_tokens_total"] - m0["memra_completion_tokens_total"]
    d_in = m1["memra_prompt_tokens_total"] - m0["memra_prompt_tokens_total"]
    check(d_out == 2 * n_tok, "completion tokens metric %g != %d" % (d_out, 2 * n_tok))
    check(d_in == 2 * sum(len(ids) for ids, _ in jobs), "prompt tokens metric %g" % d_in)
    check(m1["memra_steps_total"] > m0["memra_steps_total"], "steps")
    print("   %d clients: %d tokens in %.2f s (%.1f tok/s)" % (len(jobs), n_tok, dt, n_tok / dt),
          flush=True)


def wait_metric(srv, key, pred, timeout=5):
    end = time.time() + timeout
    while time.time() < end:
        m = srv.metrics(AUTH)
        if pred(m[key]):
            return m
        time.sleep(0.05)
    fail("%s did not reach the expected value in %g s (now %g)" % (key, timeout, m[key]))


LONG_PROMPT = "1, 2, 3, 4, 5, 6,"  # greedy SmolLM2 counts on for hundreds of tokens


def raw_post(srv, body):
    s = socket.create_connection(("127.0.0.1", srv.port))
    data = json.dumps(body).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n" % (KEY, len(data)))
    s.sendall(head.encode() + data)
    return s


def test_disconnect_and_deadline(srv):
    section("client disconnect frees the sequence at once; per-request deadline")
    for stream in (True, False):
        m0 = srv.metrics(AUTH)
        s = raw_post(srv, {"prompt": LONG_PROMPT, "max_tokens": 400, "temperature": 0,
                           "stream": stream})
        if stream:
            got = b""
            while b"data:" not in got:
                got += s.recv(4096)
        else:
            wait_metric(srv, "memra_active_sequences", lambda v: v == 1)
            time.sleep(0.2)
        s.close()
        m = wait_metric(srv, "memra_active_sequences", lambda v: v == 0, timeout=3)
        check(m["memra_requests_cancelled_total"] == m0["memra_requests_cancelled_total"] + 1,
              "stream=%s: disconnect did not cancel" % stream)
        check(m["memra_kv_blocks_in_use"] == 0, "KV blocks held after a disconnect")
    m0 = srv.metrics(AUTH)
    t0 = time.time()
    st, j = srv.request("POST", "/v1/completions", {"prompt": LONG_PROMPT, "max_tokens": 400,
                                                     "temperature": 0, "timeout": 0.3}, AUTH)
    check(st == 504 and "deadline" in j["error"]["message"], "deadline: %d %r" % (st, j))
    check(time.time() - t0 < 3, "deadline took %.1f s" % (time.time() - t0))
    m = srv.metrics(AUTH)
    check(m["memra_requests_deadline_total"] == m0["memra_requests_deadline_total"] + 1,
          "deadline metric")


def bad_requests():
    C, H = "/v1/completions", "/v1/chat/completions"
    ok = {"prompt": "Hello", "max_tokens": 2}
    msgs = [{"role": "user", "content": "hi"}]

    def cp(**kw):
        d = dict(ok)
        d.update(kw)
        return d

    nested = "[" * 5000 + "]" * 5000
    return [
        # (method, path, body, headers, status, message substring)
        ("POST", C, "{", None, 400, "invalid JSON at byte"),
        ("POST", C, "", None, 400, "the request body is empty"),
        ("POST", C, "[1, 2]", None, 400, "must be a JSON object"),
        ("POST", C, '{"prompt": "hi"} x', None, 400, "trailing bytes"),
        ("POST", C, nested, None, 400, "invalid JSON"),
        ("POST", C, {"max_tokens": 2}, None, 400, "'prompt' is required"),
        ("POST", C, cp(prompt=5), None, 400, "'prompt' must be a string or an array of token ids"),
        ("POST", C, cp(prompt=[]), None, 400, "'prompt' must not be empty"),
        ("POST", C, cp(prompt=["a", "b"]), None, 400, "only one prompt per request"),
        ("POST", C, cp(prompt=[1, 99999999]), None, 400, "token id 99999999 out of range 0..49151"),
        ("POST", C, cp(prompt=[1, 2.5]), None, 400, "'prompt'[1] must be a token id"),
        ("POST", C, cp(prompt=""), None, 400, "the prompt is empty"),
        ("POST", C, cp(prompt=[7] * (MAX_PROMPT + 1)), None, 400,
         "the prompt has %d tokens, the limit is %d" % (MAX_PROMPT + 1, MAX_PROMPT)),
        ("POST", C, cp(max_tokens="10"), None, 400, "'max_tokens' must be an integer"),
        ("POST", C, cp(max_tokens=2.5), None, 400, "'max_tokens' must be an integer"),
        ("POST", C, cp(max_tokens=0), None, 400, "'max_tokens' must be between 1"),
        ("POST", C, cp(max_tokens=100000), None, 400, "is over the limit of 512 tokens"),
        ("POST", C, cp(temperature=-1), None, 400, "'temperature' must be in [0, 2]"),
        ("POST", C, cp(temperature="hot"), None, 400, "'temperature' must be a number"),
        ("POST", C, cp(top_p=0), None, 400, "'top_p' must be in (0, 1]"),
        ("POST", C, cp(top_p=1.5), None, 400, "'top_p' must be in (0, 1]"),
        ("POST", C, cp(top_k=-1), None, 400, "'top_k' must be between 0"),
        ("POST", C, cp(min_p=2), None, 400, "'min_p' must be in [0, 1]"),
        ("POST", C, cp(presence_penalty=3), None, 400, "'presence_penalty' must be in [-2, 2]"),
        ("POST", C, cp(frequency_penalty=-2.5), None, 400, "'frequency_penalty' must be in"),
        ("POST", C, cp(n=2), None, 400, "only n=1 is supported"),
        ("POST", C, cp(best_of=3), None, 400, "only best_of=1 is supported"),
        ("POST", C, cp(stop=5), None, 400, "'stop' must be a string or an array of strings"),
        ("POST", C, cp(stop=["a", "b", "c", "d", "e"]), None, 400, "at most 4 are allowed"),
        ("POST", C, cp(stop=[""]), None, 400, "'stop' strings must not be empty"),
        ("POST", C, cp(stream="yes"), None, 400, "'stream' must be a boolean"),
        ("POST", C, cp(foo=1), None, 400, "unknown field 'foo'"),
        ("POST", C, cp(echo=True), None, 400, "'echo' is not supported"),
        ("POST", C, cp(suffix="x"), None, 400, "'suffix' is not supported"),
        ("POST", C, cp(logit_bias={"1": 5}), None, 400, "'logit_bias' is not supported"),
        ("POST", C, cp(logprobs=50), None, 400, "'logprobs' must be between 0 and 20"),
        ("POST", C, cp(seed="abc"), None, 400, "'seed' must be an integer"),
        ("POST", C, cp(model=7), None, 400, "'model' must be a string"),
        ("POST", C, cp(timeout=-1), None, 400, "'timeout' must be in (0"),
        ("POST", H, {"max_tokens": 2}, None, 400, "'messages' is required"),
        ("POST", H, {"messages": []}, None, 400, "'messages' must not be empty"),
        ("POST", H, {"messages": "hi"}, None, 400, "'messages' must be an array"),
        ("POST", H, {"messages": [5]}, None, 400, "'messages'[0] must be an object"),
        ("POST", H, {"messages": [{"role": "wizard", "content": "x"}]}, None, 400,
         "role 'wizard': expected system"),
        ("POST", H, {"messages": [{"role": "user", "content": 5}]}, None, 400,
         "'messages'[0].content must be a string"),
        ("POST", H, {"messages": [{"role": "user", "content": "x", "tool": 1}]}, None, 400,
         "'messages'[0]: unknown field 'tool'"),
        ("POST", H, {"messages": msgs, "top_logprobs": 2}, None, 400, "needs 'logprobs': true"),
        ("POST", H, {"messages": msgs, "logprobs": True, "top_logprobs": 21}, None, 400,
         "'top_logprobs' must be between 0 and 20"),
        ("POST", H, {"messages": msgs, "prompt": "x"}, None, 400, "unknown field 'prompt'"),
        ("POST", C, "x" * (MAX_BODY + 10), None, 413, "over the limit of %d bytes" % MAX_BODY),
        ("POST", C, ok, {"Authorization": ""}, 401, "missing or wrong API key"),
        ("POST", C, ok, {"Authorization": "Bearer nope"}, 401, "missing or wrong API key"),
        ("GET", "/metrics", None, {"Authorization": "Basic abc"}, 401, "missing or wrong API key"),
        ("GET", C, None, None, 405, "method not allowed"),
        ("POST", "/v1/models", ok, None, 405, "method not allowed"),
        ("DELETE", "/health", None, None, 405, "method not allowed"),
        ("GET", "/v1/nope", None, None, 404, "no such endpoint"),
        ("POST", C, ok, {"Content-Type": "text/plain"}, 415, "Content-Type must be application/json"),
    ]


def test_bad_requests(srv):
    table = bad_requests()
    section("%d bad requests, each with its status and message" % len(table))
    check(len(table) >= 30, "table too small")
    m0 = srv.metrics(AUTH)
    for method, path, body, headers, status, msg in table:
        h = dict(AUTH)
        h.update(headers or {})
        st, j = srv.request(method, path, body, h)
        what = "%s %s %.80r" % (method, path, body)
        check(st == status, "%s: status %d, expected %d (%r)" % (what, st, status, j))
        check(isinstance(j, dict) and "error" in j, "%s: not a JSON error: %r" % (what, j))
        check(msg in j["error"]["message"], "%s: message %r lacks %r" %
              (what, j["error"]["message"], msg))
        check(j["error"]["code"] == status, "%s: code" % what)
    m1 = srv.metrics(AUTH)
    d = m1['memra_requests_total{outcome="client_error"}'] - \
        m0['memra_requests_total{outcome="client_error"}']
    check(d == len(table), "client_error metric moved by %g, expected %d" % (d, len(table)))
    st, j = srv.request("GET", "/health")
    check(st == 200 and j == {"status": "ok"}, "health after bad requests")
    st, j = srv.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 3,
                                                     "temperature": 0}, AUTH)
    check(st == 200 and j["usage"]["completion_tokens"] >= 1, "good request after bad ones")


def test_slow_client(srv):
    section("a slow client (headers never finished) is closed; others are served")
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Len")
    t0 = time.time()
    st, _ = srv.request("GET", "/health")
    check(st == 200, "health while a slow client holds a connection")
    s.settimeout(10)
    try:
        data = s.recv(4096)
    except socket.timeout:
        fail("the slow connection was not closed within 10 s")
    except ConnectionResetError:
        data = b""
    check(data == b"" and time.time() - t0 < 6, "slow client: %r after %.1f s" %
          (data, time.time() - t0))
    s.close()


def test_admission_and_shutdown(binary, plugin):
    section("admission control (429 with a reason) and graceful shutdown (exit 0)")
    srv = Server(binary, plugin, ["--ctx-size", "512", "--parallel", "1", "--max-queue", "1",
                                  "--shutdown-timeout", "120"])
    results = {}

    def go(name, max_tokens):
        results[name] = srv.request("POST", "/v1/completions",
                                    {"prompt": LONG_PROMPT, "max_tokens": max_tokens,
                                     "temperature": 0})

    # A holds the only sequence until its client goes away; B waits; C finds the queue full.
    a = socket.create_connection(("127.0.0.1", srv.port))
    body = json.dumps({"prompt": LONG_PROMPT, "max_tokens": 400, "stream": True}).encode()
    a.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" %
              (len(body), body))
    wait_metric_plain(srv, "memra_active_sequences", lambda v: v == 1)
    b = threading.Thread(target=go, args=("b", 3))
    b.start()
    wait_metric_plain(srv, "memra_queue_depth", lambda v: v == 1)
    st, j = srv.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
    check(st == 429 and "server busy: 1 requests already waiting" in j["error"]["message"],
          "third request: %d %r" % (st, j))
    m = srv.metrics()
    check(m['memra_requests_total{outcome="rejected"}'] == 1, "rejected metric")
    a.close()
    b.join()
    st, j = results["b"]
    check(st == 200 and j["usage"]["completion_tokens"] == 3, "queued request: %d %r" % (st, j))

    # SIGTERM with a request in flight: it finishes, then the server exits 0.
    d = threading.Thread(target=go, args=("d", 6))
    d.start()
    wait_metric_plain(srv, "memra_active_sequences", lambda v: v == 1)
    rc = srv.stop(signal.SIGTERM, timeout=150)
    d.join()
    check(rc == 0, "exit status %d after SIGTERM:\n%s" % (rc, srv.text()))
    st, j = results["d"]
    check(st == 200 and j["usage"]["completion_tokens"] == 6,
          "in-flight request during shutdown: %d %r" % (st, j))
    check("SIGTERM: stopping" in srv.text(), "no shutdown message")
    try:
        socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
        fail("the server still accepts connections after exiting")
    except OSError:
        pass


def test_shutdown_cancels(binary, plugin):
    section("shutdown deadline: unfinished requests are cancelled with 503, exit 0")
    srv = Server(binary, plugin, ["--ctx-size", "512", "--shutdown-timeout", "0.5"])
    out = {}

    def go():
        out["r"] = srv.request("POST", "/v1/completions",
                               {"prompt": LONG_PROMPT, "max_tokens": 400, "temperature": 0})

    t = threading.Thread(target=go)
    t.start()
    wait_metric_plain(srv, "memra_active_sequences", lambda v: v == 1)
    t0 = time.time()
    rc = srv.stop(signal.SIGINT, timeout=60)
    t.join()
    check(rc == 0, "exit status %d:\n%s" % (rc, srv.text()))
    st, j = out["r"]
    check(st == 503 and "request cancelled" in j["error"]["message"], "cancelled: %d %r" % (st, j))
    check("cancelled 1 unfinished requests" in srv.text(), "no cancel message:\n" + srv.text())
    check(time.time() - t0 < 30, "shutdown took %.1f s" % (time.time() - t0))


def wait_metric_plain(srv, key, pred, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        m = srv.metrics()
        if pred(m[key]):
            return m
        time.sleep(0.02)
    fail("%s did not reach the expected value" % key)


def main():
    global QUICK
    binary, plugin = sys.argv[1], sys.argv[2]
    QUICK = "--quick" in sys.argv[3:]
    t0 = time.time()
    srv = Server(binary, plugin, ["--ctx-size", "512", "--parallel", "16", "--api-key", KEY,
                                  "--max-body", str(MAX_BODY), "--max-prompt-tokens",
                                  str(MAX_PROMPT), "--prefill-chunk", "16", "--conn-timeout", "2"])
    try:
        test_bad_requests(srv)
        test_openai_client(srv)
        test_concurrency(srv)
        test_disconnect_and_deadline(srv)
        test_slow_client(srv)
        m = srv.metrics(AUTH)
        check(m["memra_kv_blocks_in_use"] == 0, "KV blocks in use at the end")
        rc = srv.stop(signal.SIGINT)
        check(rc == 0, "exit status %d after SIGINT:\n%s" % (rc, srv.text()))
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
    test_admission_and_shutdown(binary, plugin)
    test_shutdown_cancels(binary, plugin)
    print("PASS (%.1f s)" % (time.time() - t0), flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - a client error: show the server's side too
        import traceback
        traceback.print_exc()
        fail("%s: %s" % (type(e).__name__, e))
