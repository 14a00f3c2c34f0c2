#!/usr/bin/env python3
"""An independent model of llm.c's training DataLoader (llmc/dataloader.h),
written from its documented behaviour, for tests/test_tokens.c: prints, for
each of the first N batches one rank reads, the shard's file name and the
index of the batch's first token.

  llmc_loader_ref.py 'DIR/*_train*.bin' B T RANK WORLD SHUFFLE SEED N

Semantics modelled: shards in glob order; a shard holds (ntok-1) // (world*B*T)
batches; batch i of a shard starts at (i*world + rank)*B*T; at a shard's end
the next shard loads, after the last one the loader resets (a new epoch).
With SHUFFLE=1 a Mersenne Twister seeded SEED+rank (llm.c: 42+rank) permutes
the shard order in place at every reset (so cumulatively), and each loaded
shard's batches from the identity, with llm.c's random_permutation:
for i = n-1..1, j = next32() % (i+1), swap. The generator is Python's own
(random.Random), put in the state init_genrand(SEED+rank) gives.
"""
import glob
import os
import random
import struct
import sys


def mersenne(seed):
    state = [seed & 0xFFFFFFFF]
    for j in range(1, 624):
        state.append((1812433253 * (state[-1] ^ (state[-1] >> 30)) + j) & 0xFFFFFFFF)
    r = random.Random()
    r.setstate((3, tuple(state) + (624,), None))  # index 624: twist before the first output
    return r


class Loader:
    def __init__(self, pattern, B, T, rank, world, shuffle, seed):
        self.files = sorted(glob.glob(pattern))
        assert self.files, pattern
        self.B, self.T, self.rank, self.world, self.shuffle = B, T, rank, world, shuffle
        self.per_batch = world * B * T
        if shuffle:
            self.rng = mersenne(seed + rank)
            self.order = list(range(len(self.files)))
        self.reset()

    def permute(self, v):
        for i in range(len(v) - 1, 0, -1):
            j = self.rng.getrandbits(32) % (i + 1)
            v[i], v[j] = v[j], v[i]

    def load(self, position):
        index = self.order[position] if self.shuffle else position
        self.file = self.files[index]
        with open(self.file, "rb") as f:
            magic, version, ntok = struct.unpack("<3i", f.read(12))
        assert magic == 20240520 and version == 1
        self.samples = (ntok - 1) // self.per_batch
        if self.shuffle:
            self.intra = list(range(self.samples))
            self.permute(self.intra)

    def reset(self):
        self.shard, self.sample = 0, 0
        if self.shuffle:
            self.permute(self.order)
        self.load(0)

    def advance(self):
        if self.shard == len(self.files) - 1:
            self.reset()
            return
        self.shard += 1
        self.sample = 0
        self.load(self.shard)

    def next(self):
        if self.sample >= self.samples:
            self.advance()
        i = self.intra[self.sample] if self.shuffle else self.sample
        self.sample += 1
        return os.path.basename(self.file), (i * self.world + self.rank) * self.B * self.T


def main():
    pattern = sys.argv[1]
    B, T, rank, world, shuffle, seed, n = (int(a) for a in sys.argv[2:9])
    loader = Loader(pattern, B, T, rank, world, shuffle, seed)
    for _ in range(n):
        name, start = loader.next()
        print(name, start)


if __name__ == "__main__":
    main()
