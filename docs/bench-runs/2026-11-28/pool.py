import os, sys, random, statistics as st
# python3 pool.py LOG...   (VARIANT=buf compares the variant named buf with mem; default head)
variant = os.environ.get('VARIANT', 'head')
for f in sys.argv[1:]:
    runs = {}
    for l in open(f):
        p = l.split()
        if len(p) < 4 or not p[3].isdigit(): continue
        runs.setdefault(p[1], []).append(int(p[3]))
    m, h = runs.get('mem', []), runs.get(variant, [])
    if not m or not h: continue
    ratio = st.mean(h) / st.mean(m)
    rs = sorted(st.mean(random.choices(h, k=len(h))) / st.mean(random.choices(m, k=len(m))) for _ in range(10000))
    pairs = [b / a for a, b in zip(m, h)]
    print(f, 'mem', m, variant, h, 'ratio of means %.3f' % ratio, '95%% bootstrap [%.3f, %.3f]' % (rs[250], rs[9750]), 'per-round ratios', ['%.2f' % x for x in pairs])
