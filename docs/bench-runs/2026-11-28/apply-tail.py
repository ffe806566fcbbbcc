# Tail of the FSM apply time per batch (idemnode_raft_fsm_apply_seconds), summed over every node
# of every run in RUNS (alternate.sh's result dirs) newer than SINCE (HH:MM today, UTC):
#   python3 apply-tail.py /tmp/ab/runs 11:43
import glob, os, re, sys, collections, datetime
runs, since = sys.argv[1], sys.argv[2]
h, m = map(int, since.split(':'))
cut = datetime.datetime.now(datetime.timezone.utc).replace(hour=h, minute=m, second=0).timestamp()
res = collections.defaultdict(collections.Counter)
for d in glob.glob(runs + '/*'):
    if os.path.getmtime(d) < cut:
        continue
    name = os.path.basename(d)
    v, mode = name.split('-')[0], ('claim+complete' if 'complete' in name else 'claim')
    for f in glob.glob(d + '/metrics-*.txt'):
        b = {}
        for l in open(f):
            mm = re.match(r'idemnode_raft_fsm_apply_seconds_bucket\{le="([^"]+)"\} (\S+)', l)
            if mm:
                b[mm.group(1)] = float(mm.group(2))
        if b:
            res[(v, mode)]['n'] += b['+Inf']
            for le in ['0.0032', '0.0064', '0.0128', '0.0256']:
                res[(v, mode)][le] += b['+Inf'] - b[le]
for (v, mode), c in sorted(res.items()):
    print(f"{mode:15s} {v:5s} batches {int(c['n']):7d}  " + '  '.join(
        f">{float(le)*1000:g} ms {100*c[le]/c['n']:.3f}%" for le in ['0.0032', '0.0064', '0.0128', '0.0256']))
