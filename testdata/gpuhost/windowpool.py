"""Pools whole "on" windows of several overhead.py --save runs: each window's
step rate (start to nominal end) against the mean of the off windows either
side, median over all runs with a 95% bootstrap interval, and the same
between off windows (@floor). overhead_pool.py pools the steady parts.
"new" counts as "default" (costsplit.sh named the current build so).

  python3 testdata/gpuhost/windowpool.py RUN.json...
"""
import json,bisect,statistics as st,random,sys
alias={'new':'default'}
pool={}
for p in sys.argv[1:]:
  d=json.load(open(p)); w=d['windows']; e=d['step_ends']
  def rate(a,b):
    i,j=bisect.bisect(e,a),bisect.bisect(e,b)
    if j-i<2: return None  # past the job's last step (a run ended by its budget)
    return (j-i-1)/((e[j-1]-e[i])/1e9)
  for k,x in enumerate(w):
    if x[0]=='off': continue
    nb=[rate(w[j][1]+0.5e9,w[j][2]-0.5e9) for j in (k-1,k+1) if 0<=j<len(w) and w[j][0]=='off']
    on=rate(x[1],x[2])
    if len(nb)<2 or None in nb or on is None: continue
    pool.setdefault(alias.get(x[0],x[0]),[]).append(on/st.mean(nb)-1)
  offs=[r for r in (rate(x[1]+0.5e9,x[2]-0.5e9) for x in w if x[0]=='off') if r is not None]
  pool.setdefault('@floor',[]).extend(offs[i+1]/((offs[i]+offs[i+2])/2)-1 for i in range(len(offs)-2))
random.seed(1)
for n,v in sorted(pool.items()):
  bs=sorted(st.median(random.choices(v,k=len(v))) for _ in range(4000))
  print(f"{n:9s} window on/off median {100*st.median(v):+.2f}% [{100*bs[100]:+.2f}, {100*bs[3899]:+.2f}] mean {100*st.mean(v):+.2f}% n={len(v)}")
