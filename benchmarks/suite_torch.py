r"""gpu_suite's torch group: the PyTorch peer, x-transformers with torch.compile.

At the suite's shape: `residual_attn=True` (RealFormer's residual
attention) and a plain post-norm encoder, bf16 autocast, fused AdamW, the
loss on every 8th position through the tied embedding.
"""

import time

import gpu_profile
import timing

TORCH_ROWS = {"xt_residual": "x-transformers residual_attn=True",
              "xt_plain": "x-transformers plain post-norm"}


def torch_ready(reason=False):
  """Whether the peer's rows can run here (torch, x-transformers, CUDA)."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  for module in ("torch", "x_transformers"):
    if importlib.util.find_spec(module) is None:
      return f"{module} is not importable" if reason else False
  try:
    import torch  # pylint: disable=g-import-not-at-top
    if not torch.cuda.is_available():
      return "no CUDA device for torch" if reason else False
  except Exception as e:  # pylint: disable=broad-except
    return f"torch: {e!r}"[:200] if reason else False
  return True


def _peer_step(name, shape):
  """(step(sync) -> loss, peak-memory reset) of one peer model."""
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top
  from x_transformers import Encoder, TransformerWrapper  # pylint: disable=g-import-not-at-top
  batch, seq, vocab = shape["batch"], shape["seq"], 30522
  torch.manual_seed(0)
  kw = dict(dim=shape["hidden"], depth=shape["layers"],
            heads=shape["heads"], ff_mult=shape["inner"] // shape["hidden"],
            attn_dropout=0.1, ff_dropout=0.1, pre_norm=False)
  if name == "xt_residual":
    kw["residual_attn"] = True
  model = TransformerWrapper(num_tokens=vocab, max_seq_len=seq,
                             attn_layers=Encoder(**kw)).cuda()
  opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01,
                          fused=True)
  fwd = torch.compile(model)
  g = torch.Generator().manual_seed(0)
  x = torch.randint(1000, vocab - 1, (batch, seq), generator=g).cuda()
  mask = torch.ones(batch, seq, dtype=torch.bool)
  mask[:, seq - seq // 8:] = False
  mask = mask.cuda()
  labels = torch.randint(0, vocab, (batch, seq // 8), generator=g).cuda()
  emb_w = model.token_emb.emb.weight

  def step(sync=True):
    with torch.autocast("cuda", dtype=torch.bfloat16):
      h = fwd(x, mask=mask, return_embeddings=True)[:, ::8]
      logits = h @ emb_w.t()
    loss = F.cross_entropy(logits.float().reshape(-1, vocab),
                           labels.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if sync:
      torch.cuda.synchronize()
    return loss

  return step


def torch_child(names, shape, deadline, profile=()):
  """Times the peer's rows: `ms` (each step waited for), `pipelined_ms`
  (`torch_steps` steps, one wait at the end), `peak_mb`, and with the row in
  `profile` its `gpu_profile` summary."""
  import torch  # pylint: disable=g-import-not-at-top
  if not torch.cuda.is_available():
    raise RuntimeError("no CUDA device")
  results = {}
  for name in names:
    if time.time() > deadline - 20:
      results[name] = dict(skipped="time budget")
      continue
    try:
      step = _peer_step(name, shape)
      start = time.time()
      for _ in range(3):
        step()
      compile_s = time.time() - start
      torch.cuda.reset_peak_memory_stats()
      times = timing.waited(step, shape["torch_steps"])
      pipelined = timing.pipelined(lambda: step(sync=False),
                                   torch.cuda.synchronize, shape["torch_steps"])
      loss = step()
      results[name] = dict(ms=timing.median_ms(times),
                           pipelined_ms=1000 * pipelined,
                           steps=len(times), compile_s=round(compile_s, 1),
                           peak_mb=torch.cuda.max_memory_allocated() / 2**20,
                           loss=float(loss))
      if name in profile and time.time() < deadline - 5:
        try:
          results[name]["profile"] = gpu_profile.profile_torch(
              lambda n, step=step: [step(sync=False) for _ in range(n)],
              shape["profile_steps"],
              gpu_profile.save_path(name))
        except Exception as e:  # pylint: disable=broad-except
          results[name]["profile_error"] = timing.error(e)
    except Exception as e:  # pylint: disable=broad-except
      results[name] = dict(error=timing.error(e))
    torch.cuda.empty_cache()
  return dict(device=torch.cuda.get_device_name(), rows=results)
