#!/usr/bin/env python3
"""An independent Python model of GPT-2's byte-pair encoder (the algorithm of
openai/gpt-2's src/encoder.py), with python3-regex, for tests/test_tokenizer.c
and tests/tokenize_cli.sh:

  gpt2_encoder_ref.py pieces TEXT OUT          byte length of each pre-token piece
  gpt2_encoder_ref.py encode ENCODER BPE TEXT OUT   token ids, one per line
  gpt2_encoder_ref.py train TEXT MERGES DIR    a small vocabulary, encoder.json + vocab.bpe
  gpt2_encoder_ref.py docs ENCODER BPE SEP OUT TEXT...   ids of documents (split at
                                               lines equal to SEP; "" = whole files), each
                                               after <|endoftext|>, as `scaleout tokenize` does

TEXT files are read as UTF-8. The trainer is deliberately naive (recount
every pair after every merge): it shares nothing with scaleout's.
"""
import json
import sys

import regex

PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_alphabet():
    """bytes_to_unicode: printable bytes stand for themselves, the rest for 256+."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


BYTE_CHAR = byte_alphabet()
CHAR_BYTE = {c: b for b, c in BYTE_CHAR.items()}


def pairs_of(word):
    return {(word[i], word[i + 1]) for i in range(len(word) - 1)}


class Encoder:
    def __init__(self, encoder_path, bpe_path):
        with open(encoder_path, encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(bpe_path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(l.split()) for l in lines[1:] if l]
        self.ranks = dict(zip(merges, range(len(merges))))
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = pairs_of(word)
        while pairs:
            bigram = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if bigram not in self.ranks:
                break
            first, second = bigram
            out, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    out.append(first + second)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = tuple(out)
            if len(word) == 1:
                break
            pairs = pairs_of(word)
        self.cache[token] = word
        return word

    def encode(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            chars = "".join(BYTE_CHAR[b] for b in piece.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(chars))
        return ids


def train(text, merges, out_dir):
    """Naive BPE: count pairs over piece frequencies, merge the most frequent
    (ties: the smaller pair of ids), recount; ids 0..255 = bytes."""
    freq = {}
    for piece in PATTERN.findall(text):
        key = tuple(piece.encode("utf-8"))
        freq[key] = freq.get(key, 0) + 1
    vocab = {i: bytes([i]) for i in range(256)}
    by_bytes = {v: k for k, v in vocab.items()}
    rules = []
    words = {k: list(k) for k in freq}
    for _ in range(merges):
        counts = {}
        for k, w in words.items():
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + freq[k]
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        if counts[best] < 2:
            break
        merged = vocab[best[0]] + vocab[best[1]]
        if merged not in by_bytes:
            by_bytes[merged] = len(vocab)
            vocab[len(vocab)] = merged
        new = by_bytes[merged]
        rules.append(best)
        for k, w in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[k] = out
    vocab[len(vocab)] = b"<|endoftext|>"
    spell = lambda b: "".join(BYTE_CHAR[x] for x in b)
    with open(out_dir + "/encoder.json", "w", encoding="utf-8") as f:
        json.dump({spell(v): k for k, v in vocab.items()}, f, ensure_ascii=False)
    with open(out_dir + "/vocab.bpe", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in rules:
            f.write(spell(vocab[a]) + " " + spell(vocab[b]) + "\n")


def read_text(path):
    with open(path, encoding="utf-8", newline="") as f:  # bytes as they are: no newline translation
        return f.read()


def documents(path, sep):
    """The file's documents: split at lines (ended by \n only) equal to sep."""
    text = read_text(path)
    if not sep:
        return [text] if text else []
    docs, cur = [], []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line == sep:
            docs.append("".join(cur))
            cur = []
        else:
            cur.append(line + ("\n" if i + 1 < len(lines) else ""))
    docs.append("".join(cur))
    return [d for d in docs if d]


def main():
    mode = sys.argv[1]
    if mode == "pieces":
        text = read_text(sys.argv[2])
        with open(sys.argv[3], "w") as f:
            for p in PATTERN.findall(text):
                f.write("%d\n" % len(p.encode("utf-8")))
    elif mode == "encode":
        enc = Encoder(sys.argv[2], sys.argv[3])
        ids = enc.encode(read_text(sys.argv[4]))
        with open(sys.argv[5], "w") as f:
            f.write("".join("%d\n" % i for i in ids))
    elif mode == "train":
        train(read_text(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif mode == "docs":
        enc = Encoder(sys.argv[2], sys.argv[3])
        eot = enc.encoder["<|endoftext|>"]
        ids = []
        for path in sys.argv[6:]:
            for d in documents(path, sys.argv[4]):
                ids.append(eot)
                ids.extend(enc.encode(d))
        with open(sys.argv[5], "w") as f:
            f.write("".join("%d\n" % i for i in ids))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
