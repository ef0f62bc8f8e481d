import gc
import json
import os
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig as C
from transformers import LlamaForCausalLM as M

# LoRA and full fine-tunes of random-init Llama shapes on one GPU, for the forecast.
# One device call each: python -m bench.gpu_lora_pack [v] prints it (v: the validation set V). $OUT/lora.json.
# The first call (list P, 2026-12-01) also recorded adapter_dtype (float32: peft's autocast_adapter_dtype).
O=os.environ.get("OUT",".");cu="cuda";bf=torch.bfloat16
S={"1b":(2048,16,32,8,8192,128256),"3b":(3072,28,24,8,8192,128256),
 "7b":(4096,32,32,32,11008,32000),"8b":(4096,32,32,8,14336,128256)}  # h L a kv ffn V
TG=["q_proj","k_proj","v_proj","o_proj","gate_proj","up_proj","down_proj"]
R={"gpu":torch.cuda.get_device_name(),"torch":torch.__version__,"runs":[]}
def run(n,mode,r,ck,b,s=2048,k=6):
 h,L,a,kv,f,V=S[n];e=dict(shape=n,mode=mode,rank=r,ckpt=ck,b=b,s=s)
 m=o=x=l=None
 try:
  c=C(hidden_size=h,num_hidden_layers=L,num_attention_heads=a,num_key_value_heads=kv,intermediate_size=f,
   vocab_size=V,max_position_embeddings=s,use_cache=False,tie_word_embeddings=False)
  c._attn_implementation="sdpa"
  with torch.device(cu):m=M(c)
  e["params"]=sum(p.numel() for p in m.parameters())
  if mode!="full":m.to(bf)
  if ck:m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant":False})
  if mode=="lora":m=get_peft_model(m,LoraConfig(r=r,lora_alpha=2*r,lora_dropout=0.0,target_modules=TG))
  if mode=="frozen":
   m.requires_grad_(False);m.get_input_embeddings().register_forward_hook(lambda _,i,y:y.requires_grad_())
  m.train();T=[p for p in m.parameters() if p.requires_grad]
  e["trainable"]=sum(p.numel() for p in T)
  o=torch.optim.AdamW(T,lr=1e-5,fused=True) if T else None
  x=torch.randint(0,V,(b,s),device=cu)
  gc.collect();torch.cuda.empty_cache();torch.cuda.reset_peak_memory_stats();t=[]
  for i in range(k+2):
   torch.cuda.synchronize();t0=time.perf_counter()
   with torch.autocast(cu,bf):l=m(input_ids=x,labels=x).loss
   l.backward()
   if o:o.step();o.zero_grad(set_to_none=True)
   torch.cuda.synchronize();t.append(time.perf_counter()-t0)
  t=sorted(t[2:]);fr,tot=torch.cuda.mem_get_info()
  e.update(step_s=t[k//2],steps_s=t,tok_s=b*s/t[k//2],loss=float(l),
   alloc=torch.cuda.max_memory_allocated(),reserved=torch.cuda.max_memory_reserved(),
   context=tot-fr-torch.cuda.memory_reserved(),total=tot)
 except torch.OutOfMemoryError as z:e["oom"]=str(z)[:300]
 except Exception as z:e["error"]=repr(z)[:500]
 del m,o,x,l;gc.collect();torch.cuda.empty_cache()
 R["runs"].append(e);json.dump(R,open(O+"/lora.json","w"),indent=1)
 print({q:v for q,v in e.items() if q!="steps_s"},flush=True)
P=[("7b","lora",16,1,4),("7b","lora",64,1,4),("7b","lora",16,0,2),("7b","frozen",0,1,4),
 ("1b","lora",16,1,8),("1b","lora",16,0,4),("1b","lora",64,1,8),("1b","frozen",0,1,8),
 ("1b","full",0,1,8),("1b","full",0,0,4),("3b","lora",16,1,8),("3b","lora",16,0,4),("3b","full",0,1,4),
 ("8b","lora",16,1,4),("7b","full",0,1,1)]
V=[("8b","lora",16,0,2),("7b","lora",8,1,8),("3b","lora",32,1,4,4096),("1b","lora",16,1,2,8192),
 ("8b","lora",16,1,8,4096),("3b","full",0,0,2),("7b","lora",16,0,8),("8b","full",0,1,1)]
for p in V if os.environ.get("PLAN")=="v" else P:run(*p)
