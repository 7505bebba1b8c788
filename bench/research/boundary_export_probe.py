"""Research probe for issue #32 (docs/experiments/boundary.md): builds gliner2 2.1.0's BoundaryHead at a tiny
hidden size with random weights, exports its default inference path (candidates + reranker logits) to ONNX with
export-time patches, and compares onnxruntime's candidates and logits with the library's at several shapes.
Run: ~/.cache/sift/venv/bin/python bench/research/boundary_export_probe.py (seconds, one thread)."""

import time, dataclasses, torch, numpy as np
torch.set_num_threads(1)
from gliner2.configuration import BoundaryHeadSettings, validate_boundary_head
from gliner2.models.boundary.model import BoundaryHead
t0=time.time()
D=64
s = BoundaryHeadSettings(**validate_boundary_head({}))
torch.manual_seed(0)
head = BoundaryHead(D, s, query_dim=D, build_candidate_states=True).eval()
p = head.boundary_proposer
p.settings = dataclasses.replace(p.settings, export_mode="vectorized")

class W(torch.nn.Module):
    def __init__(s, h): super().__init__(); s.h=h
    def forward(s, word_embs, word_mask, queries, query_mask):
        out = s.h(word_embs, word_mask.bool(), queries, query_mask.bool(), return_candidates=True)
        c = out.candidates
        return c.indices, c.pair_logits, c.valid_mask, out.null_logits, out.count_log_rates, c.candidate_states

def inputs(B, L, Q, lens, qs, seed):
    g=torch.Generator().manual_seed(seed)
    we=torch.randn(B,L,D,generator=g); qe=torch.randn(B,Q,D,generator=g)
    wm=(torch.arange(L)[None]<torch.tensor(lens)[:,None]).long()
    qm=(torch.arange(Q)[None]<torch.tensor(qs)[:,None]).long()
    we=we*wm[...,None]
    return we,wm,qe,qm
args=inputs(2,40,3,[40,25],[3,2],1)
w=W(head).eval()
_sort, _argsort = torch.sort, torch.argsort
def topk_sort(x, dim=-1, descending=False, stable=False, **kw):
    if dim < 0: dim += x.dim()
    v, i = torch.topk(x, x.shape[dim], dim=dim, largest=descending, sorted=True)
    return v, i
def topk_argsort(x, dim=-1, descending=False, stable=False, **kw):
    return topk_sort(x, dim=dim, descending=descending)[1]
torch.sort, torch.argsort = topk_sort, topk_argsort
import gliner2.models.boundary.encoding as enc
def shift_left(text_states, bos_state):
    b = text_states[:, :1]
    return torch.cat([bos_state.to(text_states.dtype).view(1, 1, -1).expand_as(b), text_states], dim=1)
def shift_right(text_states, text_lengths, eos_state):
    l = text_states.shape[1]
    padded = torch.cat([text_states, torch.zeros_like(text_states[:, :1])], dim=1)
    pos = torch.arange(l + 1, device=text_states.device).view(1, -1, 1)
    at_n = pos == text_lengths.clamp(max=l).view(-1, 1, 1)
    return torch.where(at_n, eos_state.to(text_states.dtype).view(1, 1, -1), padded)
enc.shift_left_with_bos, enc.shift_right_with_eos = shift_left, shift_right
with torch.no_grad():
    torch.onnx.export(w,args,"/tmp/bres/boundary_head.onnx",input_names=["word_embs","word_mask","queries","query_mask"],
      output_names=["cand_idx","pair_logits","cand_valid","null_logits","count_log_rates","cand_states"],
      dynamic_axes={"word_embs":{0:"b",1:"l"},"word_mask":{0:"b",1:"l"},"queries":{0:"b",1:"q"},"query_mask":{0:"b",1:"q"},
        "cand_idx":{0:"b",1:"q"},"pair_logits":{0:"b",1:"q"},"cand_valid":{0:"b",1:"q"},"null_logits":{0:"b",1:"q"},"count_log_rates":{0:"b",1:"q"},"cand_states":{0:"b",1:"q"}},
      opset_version=17, dynamo=False)
torch.sort, torch.argsort = _sort, _argsort
print("export s", round(time.time()-t0,1))
import onnxruntime as ort
so=ort.SessionOptions(); so.intra_op_num_threads=1; so.inter_op_num_threads=1
sess=ort.InferenceSession("/tmp/bres/boundary_head.onnx",so,providers=["CPUExecutionProvider"])
import collections
import onnx
ops=collections.Counter(n.op_type for n in onnx.load("/tmp/bres/boundary_head.onnx").graph.node)
print("ops", dict(ops))
for (B,L,Q,lens,qs,seed) in [(2,40,3,[40,25],[3,2],2),(1,60,5,[60],[5],3),(3,20,2,[20,17,16],[2,2,1],4),(1,10,2,[10],[2],5)]:
    a=inputs(B,L,Q,lens,qs,seed)
    try:
        got=sess.run(None,{"word_embs":a[0].numpy(),"word_mask":a[1].numpy(),"queries":a[2].numpy(),"query_mask":a[3].numpy()})
    except Exception as e:
        print("ORT fail", (B,L,Q), str(e)[:200]); continue
    with torch.no_grad(): ref=w(*a)
    # compare valid candidate sets per (b,q)
    ok=True; md=0.0
    for b in range(B):
        for q in range(qs[b]):
            rv=ref[2][b,q].numpy(); gv=got[2][b,q]
            rs={tuple(x):float(l) for x,l,v in zip(ref[0][b,q].numpy(),ref[1][b,q].numpy(),rv) if v}
            gs={tuple(x):float(l) for x,l,v in zip(got[0][b,q],got[1][b,q],gv) if v}
            if rs.keys()!=gs.keys(): ok=False
            else: md=max(md,max((abs(rs[k]-gs[k]) for k in rs),default=0))
            # ordering equal?
            ro=[tuple(x) for x,v in zip(ref[0][b,q].numpy(),rv) if v]; go=[tuple(x) for x,v in zip(got[0][b,q],gv) if v]
            if ro!=go: ok=False
    print((B,L,Q), "same candidates+order:", ok, "n_valid", int(ref[2].sum()), "max|dlogit|", md,
          "null", float(np.abs(ref[3].numpy()-got[3]).max()))
print("total s", round(time.time()-t0,1))
