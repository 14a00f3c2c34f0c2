#!/usr/bin/python3
"""An independent PyTorch 1.13 GPT-2 (nanoGPT-style eager modules under Hugging
Face's names), the reference scaleout's GPT-2 (src/models/gpt2.c) is checked
and benchmarked against, plus llm.c's two file formats:

  * the model file (train_gpt2.c's gpt2_124M.bin): a header of 256 int32 (magic
    20240326, version 3, maxT, V, L, NH, C, Vp) and the FP32 parameters in
    llm.c's order (wte, wpe, then each of the 12 per-layer tensors for all
    layers, then ln_f);
  * the token file: a header of 256 int32 (magic 20240520, version 1, count)
    and the tokens as uint16.

The model keeps llm.c's padded vocabulary: the token table has Vp rows, the
logits Vp columns, and the loss reads the first V. Used by tests/gpt2_torch.sh
(the tiny spec in `make test`), bench/gpt2_check.py (GPT-2 124M) and the
benchmarks (bench/gpt2_bench.py).
"""
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_MAGIC, MODEL_VERSION = 20240326, 3
TOKENS_MAGIC, TOKENS_VERSION = 20240520, 1


class Config:
    """L layers, H heads, C channels, T context, V vocabulary, Vp padded."""

    def __init__(self, L=12, H=12, C=768, T=1024, V=50257, Vp=None, dropout=0.0):
        self.L, self.H, self.C, self.T, self.V = L, H, C, T, V
        self.Vp = Vp if Vp is not None else (V + 127) // 128 * 128
        self.dropout = dropout

    @staticmethod
    def parse(spec):
        """'gpt2:L=4,H=4,C=128,T=64,V=512' (keys as scaleout's zoo.h)."""
        base, _, rest = spec.partition(":")
        sizes = {"gpt2": (12, 12, 768), "gpt2-medium": (24, 16, 1024), "gpt2-large": (36, 20, 1280),
                 "gpt2-xl": (48, 25, 1600)}
        L, H, C = sizes[base]
        kw = {"L": L, "H": H, "C": C}
        for kv in filter(None, rest.split(",")):
            k, v = kv.split("=")
            kw[k] = float(v) if k == "dropout" else int(v)
        return Config(**kw)

    def spec(self):
        return "gpt2:L=%d,H=%d,C=%d,T=%d,V=%d,Vp=%d" % (self.L, self.H, self.C, self.T, self.V, self.Vp)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.H = cfg.H
        self.c_attn = nn.Linear(cfg.C, 3 * cfg.C, device=device)
        self.c_proj = nn.Linear(cfg.C, cfg.C, device=device)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        # PyTorch 1.13 has no fused attention: the (T, T) scores are materialised.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.c_fc = nn.Linear(cfg.C, 4 * cfg.C, device=device)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * cfg.C, cfg.C, device=device)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.C, device=device)
        self.attn = CausalSelfAttention(cfg, device)
        self.ln_2 = nn.LayerNorm(cfg.C, device=device)
        self.mlp = MLP(cfg, device)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln_1(x)))
        return x + self.drop(self.mlp(self.ln_2(x)))


class GPT(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.Vp, cfg.C, device=device),
            wpe=nn.Embedding(cfg.T, cfg.C, device=device),
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList([Block(cfg, device) for _ in range(cfg.L)]),
            ln_f=nn.LayerNorm(cfg.C, device=device)))
        self.lm_head = nn.Linear(cfg.C, cfg.Vp, bias=False, device=device)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def init_weights(self, seed):
        """nanoGPT's: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0."""
        g = torch.Generator().manual_seed(seed)
        proj = 0.02 / math.sqrt(2 * self.cfg.L)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = proj if name.endswith("c_proj.weight") else 0.02
                    p.copy_(torch.randn(p.shape, generator=g) * std)
                elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                    p.fill_(1.0)
                else:
                    p.zero_()
        return self

    def forward(self, idx, targets=None):
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits, None
        V = self.cfg.V
        loss = F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def optimizer(self, lr, weight_decay, betas=(0.9, 0.95), eps=1e-8):
        """AdamW with decay on the 2-D tensors only (matrices and embeddings)."""
        decay = [p for p in self.parameters() if p.dim() >= 2]
        rest = [p for p in self.parameters() if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": rest, "weight_decay": 0.0}], lr=lr, betas=betas, eps=eps)


def llmc_tensors(model):
    """The parameters in llm.c's file order: (name, tensor)."""
    sd = dict(model.named_parameters())
    L = model.cfg.L
    out = [("transformer.wte.weight", sd["transformer.wte.weight"]),
           ("transformer.wpe.weight", sd["transformer.wpe.weight"])]
    for part in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                 "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                 "mlp.c_proj.weight", "mlp.c_proj.bias"):
        out += [("transformer.h.%d.%s" % (l, part), sd["transformer.h.%d.%s" % (l, part)]) for l in range(L)]
    out += [("transformer.ln_f.weight", sd["transformer.ln_f.weight"]),
            ("transformer.ln_f.bias", sd["transformer.ln_f.bias"])]
    return out


def write_model(model, path):
    c = model.cfg
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [MODEL_MAGIC, MODEL_VERSION, c.T, c.V, c.L, c.H, c.C, c.Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for _, t in llmc_tensors(model):
            f.write(t.detach().cpu().numpy().astype(np.float32).tobytes())


def read_model(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        if header[0] != MODEL_MAGIC or header[1] != MODEL_VERSION:
            raise ValueError("%s: not an llm.c model file (version 3)" % path)
        T, V, L, H, C, Vp = (int(v) for v in header[2:8])
        model = GPT(Config(L=L, H=H, C=C, T=T, V=V, Vp=Vp))
        body = np.frombuffer(f.read(), dtype=np.float32)
    at = 0
    with torch.no_grad():
        for _, t in llmc_tensors(model):
            t.copy_(torch.from_numpy(body[at:at + t.numel()].copy()).view(t.shape))
            at += t.numel()
    if at != body.size:
        raise ValueError("%s: %d floats, the header's sizes need %d" % (path, body.size, at))
    return model


def grads_llmc(model):
    """The parameters' gradients flattened in llm.c's order (float64 numpy)."""
    return [(n, t.grad.detach().double().numpy().ravel()) for n, t in llmc_tensors(model)]


def write_tokens(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [TOKENS_MAGIC, TOKENS_VERSION, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def read_tokens(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        if header[0] != TOKENS_MAGIC:
            raise ValueError("%s: not an llm.c token file" % path)
        return np.frombuffer(f.read(2 * int(header[2])), dtype=np.uint16).astype(np.int64)


def batch(tokens, step, B, T):
    """llm.c's order: batch i is the B*T+1 tokens from i*B*T, inputs and targets shifted by one."""
    chunk = torch.from_numpy(tokens[step * B * T: step * B * T + B * T + 1].copy())
    return chunk[:-1].view(B, T), chunk[1:].view(B, T)


def clip_grad_norm(model, max_norm):
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


if __name__ == "__main__":
    import sys
    cfg = Config.parse(sys.argv[1] if len(sys.argv) > 1 else "gpt2")
    m = GPT(cfg, device="meta")
    print(cfg.spec(), sum(p.numel() for p in m.parameters()))
