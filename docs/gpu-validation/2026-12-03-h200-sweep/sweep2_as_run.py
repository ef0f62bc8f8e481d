import gc,json,os,statistics as st,time,torch
Y=torch.cuda.synchronize
from peft import LoraConfig as LC,get_peft_model as gp
from transformers import LlamaConfig as C,LlamaForCausalLM as M
O=os.environ["OUT"];S={"1024":(1024,8,8,8,2816,32000),"2048":(2048,4,16,8,8192,128256),"3072":(3072,4,24,8,8192,128256),"4096":(4096,4,32,8,14336,128256),"4096m":(4096,4,32,32,11008,32000),"5120":(5120,3,40,40,13824,32000),"6144":(6144,2,48,8,16384,32000),"8192":(8192,2,64,8,28672,128256),"1024d":(1024,24,8,8,2816,32000),"2048d":(2048,16,16,8,8192,128256)}
P=[l.split(",") for l in "2048,f,0,1,1024 2048,l,0,1,1024 2048,l,1,1,1024 3072,f,0,1,1024 3072,l,0,1,1024 4096m,f,0,1,1024 4096m,l,1,1,1024 5120,l,0,1,1024 5120,f,1,1,1024 6144,l,0,1,1024 8192,l,0,1,1024 8192,f,1,1,1024 1024,l,0,1,1024 1024,l,1,4,1024 1024,f,1,1,2048 1024,f,0,4,1024 4096,f,0,2,2048 1024,l,0,4,2048 1024d,f,0,4,2048 1024d,l,0,4,2048 1024d,l,1,1,1024 2048d,f,1,4,2048 2048d,l,0,1,1024 2048d,f,0,2,2048 4096,l,0,1,2048 6144,f,0,2,1024".split()]
R={"gpu":torch.cuda.get_device_name(),"torch":torch.__version__,"runs":[]};B=time.monotonic()
for n,me,ck,b,s in P:
 ck,b,s=int(ck),int(b),int(s);h,L,a,kv,f,V=S[n];e=dict(shape=n,method=me,ckpt=ck,b=b,s=s)
 if time.monotonic()-B>530:break
 m=o=x=l=None
 try:
  c=C(hidden_size=h,num_hidden_layers=L,num_attention_heads=a,num_key_value_heads=kv,intermediate_size=f,vocab_size=V,max_position_embeddings=max(s,2048),use_cache=False,tie_word_embeddings=False);c._attn_implementation="sdpa"
  with torch.device("cuda"):m=M(c)
  if me!="f":m.to(torch.bfloat16)
  if ck:m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant":False})
  if me=="l":m=gp(m,LC(r=16,lora_alpha=32,lora_dropout=0.0,target_modules="all-linear"))
  m.train();T=[p for p in m.parameters() if p.requires_grad];e["params"]=sum(p.numel() for p in m.parameters());e["trainable"]=sum(p.numel() for p in T)
  o=torch.optim.AdamW(T,lr=1e-5,fused=True);x=torch.randint(0,V,(b,s),device="cuda");t=[]
  for i in range(7):
   if i==2:gc.collect();Y();torch.cuda.reset_peak_memory_stats();e["states"]=torch.cuda.memory_allocated()
   Y();t0=time.perf_counter()
   with torch.autocast("cuda",torch.bfloat16):l=m(input_ids=x,labels=x).loss
   l.backward();o.step();o.zero_grad(set_to_none=True);Y();t.append(time.perf_counter()-t0)
  t=t[2:];fr,tot=torch.cuda.mem_get_info();q=st.median(t)
  e.update(step_s=q,steps_s=t,tokens_per_s=b*s/q,alloc=torch.cuda.max_memory_allocated(),reserved=torch.cuda.max_memory_reserved(),context=tot-fr-torch.cuda.memory_reserved())
 except Exception as z:e["error"]=repr(z)[:300]
 del m,o,x,l;gc.collect();torch.cuda.empty_cache();e["wall_s"]=round(time.monotonic()-B,1);R["runs"].append(e);json.dump(R,open(O+"/sweep2.json","w"),indent=1);print(e,flush=True)
