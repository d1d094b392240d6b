"""The sharding search's integer linear program (solve.py states the model): its
variables, costs and constraints, built from the solver's graph and its classes, and
solved by HiGHS through scipy.optimize.milp."""
from __future__ import annotations

import time

import numpy as np

from . import cuts
from .strategies import key
from ..errors import ShardcError

_DISP = False
_BYTE_S = 1e-15      # the objective's tie-break: seconds per byte held or made


class Ilp:
    """The program of a graph's classes (solve.py's model): per class its cost, memory
    and bytes made per choice, the joint variables of the edges between classes, the
    shared reshards of parameters, the ties, the peak cuts; `solve` gives the choice
    per class."""

    def __init__(self, g, classes):
        self.g, self.classes = g, classes
        self.times = {}
        # peak constraints: (bytes per class per choice, cap, {shared value class:
        # bytes of the gathered copy per target})
        self.cuts = []
        cls = {}
        for c, members in enumerate(classes):
            for grp in members:
                cls[id(grp)] = c
        self.cls = cls
        self.cost = [sum(grp.cost for grp in m) for m in classes]
        self.mem = [sum(grp.mem for grp in m) for m in classes]
        self.held = [sum(grp.held for grp in m) for m in classes]
        pairs = {}
        uses = {}
        for e in g.edges:
            # (a reshard in a loop body runs every trip: not one shared per step)
            if cls[id(e.src)] != cls[id(e.dst)] and e.runs == 1:
                uses.setdefault(id(e.value), []).append(e)
        self.shared = {}     # value class -> _Shared: one reshard per target, not per use
        self.raw = {}        # (a, b, tag) -> cost matrix: joint choices of a shared edge
        self.rawkeys = {}    # (a, b, tag) -> (source dims, target dims) per choice
        for es in uses.values():
            # the parameters (a weight gathered for the forward and the backward pass,
            # and held from the start: the memory cuts count it by its y); activations
            # keep one reshard per use (their joint variables would cost the LP more
            # time than the bias they remove)
            if es[0].src.inputs and es[0].src.n > 1:
                self._share(es)
        shared = {id(e) for sh in self.shared.values() for e in sh.edges}
        for e in g.edges:
            if id(e) in shared:
                continue
            a, b = cls[id(e.src)], cls[id(e.dst)]
            m = g.matrix(e)
            if a == b:
                self.cost[a] = self.cost[a] + np.diag(m)
            elif m.shape[0] == 1:
                self.cost[b] = self.cost[b] + m[0]
            elif m.shape[1] == 1:
                self.cost[a] = self.cost[a] + m[:, 0]
            else:
                # edges alike (the same reshard between the same classes: a layer's
                # repeats) add up; others keep joint variables of their own, fewer
                # than for their sum, whose rows and columns would rarely be alike
                k = (a, b, id(m)) if a < b else (b, a, id(m))
                m = m if a < b else m.T
                pairs[k] = pairs[k] + m if k in pairs else m.copy()
        self.full = {}
        for (a, b, tag), m in pairs.items():
            # a cost that is a sum of one term per side needs no joint variables
            rest = m - m[:, :1] - m[:1, :] + m[0, 0]
            if np.allclose(rest, 0.0, atol=1e-15):
                self.cost[a] = self.cost[a] + m[:, 0] - m[0, 0]
                self.cost[b] = self.cost[b] + m[0, :]
            else:
                self.full[(a, b, tag)] = m
        # sharding groups (a gradient tied to its parameter): for every sharding D, the
        # choices giving one value D are taken as often as those giving the other D
        self.ties = {}
        for vals in g.tied.values():
            vals = [v for v in vals if id(v) in g.where]
            for v in vals[1:]:
                a, b = cls[id(g.where[id(vals[0])])], cls[id(g.where[id(v)])]
                da = tuple(map(key, g.where[id(vals[0])].values[id(vals[0])]))
                db = tuple(map(key, g.where[id(v)].values[id(v)]))
                self.ties[(a, da, b, db)] = None
        self.keep = _prune(self.cost, self.mem, {**self.full, **self.raw}, self.ties,
                           self.held)
        self._edge_of = None

    def _share(self, es):
        """Edges carrying one value to consumers in other classes: XLA reshards the value
        once per target sharding, however many ops read it that way. Values alike (a
        layer's repeats: the same producer class, type, dims and kinds of readers)
        share one _Shared, whose count multiplies its costs."""
        g = self.g
        src = es[0].src
        a = self.cls[id(src)]
        kinds = []
        v = es[0].value
        srcs = [key(d) for d in src.values[id(v)]]
        for e in es:
            m = g.matrix(e)
            b = self.cls[id(e.dst)]
            kinds.append((b, id(m)))
            self.raw.setdefault((a, b, id(m)), m)
            self.rawkeys.setdefault((a, b, id(m)), (srcs, [key(t) for t in e.targets]))
        k = (a, tuple(sorted(set(kinds))), tuple(srcs), v.aval)
        sh = self.shared.get(k)
        if sh is None:
            targets = {}
            for e, (b, tag) in zip(es, kinds):
                targets[(b, tag)] = [key(t) for t in e.targets]
            ts = sorted({t for tt in targets.values() for t in tt}, key=repr)
            cost = np.array([[g.reshard(v.aval, s, t)[0] for t in ts] for s in srcs])
            sh = self.shared[k] = _Shared(a, srcs, ts, cost, targets)
        sh.count += 1
        sh.edges += es

    def cut(self, sol, budget, memory=None) -> bool:
        """Constrain the bytes live where `sol` peaks (cuts.cut)."""
        return cuts.cut(self, sol, budget, memory)

    def min_memory(self) -> float:
        return float(sum(m.min() for m in self.mem))

    def solve(self, budget, time_limit, gap, exact=False):
        """The chosen choice per class. The LP relaxation first (Alpa's ILPs are
        nearly integral: a class's LP weight is mostly on one choice or split among
        ties); the MIP then chooses among the choices the LP weighs (the whole problem
        again if they admit no solution). `bound` is the relaxation's objective, a
        lower bound on the optimum: `objective / bound - 1` bounds how far from it."""
        from scipy.optimize import Bounds, LinearConstraint, milp
        opts = {"time_limit": time_limit, "presolve": True, "disp": _DISP}
        prob = self._problem(self.keep, budget)
        self.variables, self.rows = prob[0].size, prob[2].shape[0]
        obj, integ, a, lo, hi, off, lens = prob
        t0 = time.perf_counter()
        lp = milp(obj, bounds=Bounds(0.0, 1.0), constraints=LinearConstraint(a, lo, hi),
                  options=opts)
        self.times["lp"] = time.perf_counter() - t0
        if lp.x is None:
            raise ShardcError(f"the sharding search found no solution: {lp.message}")
        self.bound = float(lp.fun) / 1e6
        keep = [k[lp.x[o:o + n] > 1e-6] for k, o, n in zip(self.keep, off, lens)]
        for attempt in ([self.keep] if exact else [keep, self.keep]):
            obj, integ, a, lo, hi, off, lens = self._problem(attempt, budget)
            res = milp(obj, integrality=integ, bounds=Bounds(0.0, 1.0),
                       constraints=LinearConstraint(a, lo, hi),
                       options=dict(opts, mip_rel_gap=gap))
            if res.x is not None:
                break
        self.times["mip"] = time.perf_counter() - t0 - self.times["lp"]
        self.fixed = sum(len(k) == 1 for k in attempt)
        if res.x is None:
            raise ShardcError(f"the sharding search found no solution: {res.message}")
        self.objective = float(res.fun) / 1e6
        return [int(k[np.argmax(res.x[o:o + n])]) for k, o, n in zip(attempt, off, lens)]

    def _problem(self, keep, budget):
        """(objective, integrality, A, lower, upper, x offsets, x counts) with the
        choices `keep` per class."""
        from scipy.sparse import coo_matrix
        pairs = {}
        cost = [c[k] for c, k in zip(self.cost, keep)]
        for (a, b, tag), m in self.full.items():
            m = m[keep[a]][:, keep[b]]
            if m.shape[0] == 1 or m.shape[1] == 1:     # one side decided: its own cost
                cost[a] = cost[a] + m.min(1) if m.shape[1] == 1 else cost[a]
                cost[b] = cost[b] + m[0] if m.shape[0] == 1 and m.shape[1] > 1 else cost[b]
                continue
            # choices whose rows (columns) are alike share joint variables: the
            # transportation between the merged one-hot rows is as exact
            m1, rg = np.unique(m, axis=0, return_inverse=True)
            m2, cg = np.unique(m1, axis=1, return_inverse=True)
            pairs[(a, b, tag)] = (m2, rg.ravel(), cg.ravel())
        off, n = [], 0
        for c in cost:
            off.append(n)
            n += len(c)
        nx = n
        poff = {}
        for ab, (m, _, _) in pairs.items():
            poff[ab] = n
            n += m.size
        # joint choices of shared edges, by the value's dims (rows) and the target
        # (columns): what a reshard depends on; no cost of their own
        roff = {}
        for k, (srcs, tgts) in self.rawkeys.items():
            a, b = k[0], k[1]
            if len(keep[a]) > 1 and len(keep[b]) > 1:
                us = sorted({srcs[i] for i in keep[a]}, key=repr)
                ut = sorted({tgts[i] for i in keep[b]}, key=repr)
                roff[k] = (n, us, ut)
                n += len(us) * len(ut)
        # per shared value class: y[S, T], "the value, its dims S, is resharded to T"
        yoff, ycost = [], []
        for sh in self.shared.values():
            us = sorted({sh.srcs[i] for i in keep[sh.a]}, key=repr)
            first = {sh.srcs[i]: i for i in reversed(keep[sh.a])}
            live = {tt[i] for (b, _), tt in sh.targets.items() for i in keep[b]}
            cells = [(sk, j) for sk in us for j, t in enumerate(sh.ts)
                     if t in live and sh.cost[first[sk], j] > 0]
            yoff.append((n, cells))
            ycost.append(np.array([sh.count * sh.cost[first[sk], j] for sk, j in cells]))
            n += len(cells)
        obj = np.concatenate([(c + _BYTE_S * (m[k] + h[k])) * 1e6 for c, m, h, k in
                              zip(cost, self.mem, self.held, keep)]
                             + [m.ravel() * 1e6 for m, _, _ in pairs.values()]
                             + [np.zeros(len(us) * len(ut)) for _, us, ut in roff.values()]
                             + [c * 1e6 for c in ycost])
        rows, cols, vals, lo, hi = [], [], [], [], []
        r = 0
        for c, cc in enumerate(cost):           # one choice per class
            k = len(cc)
            rows += [r] * k
            cols += range(off[c], off[c] + k)
            vals += [1.0] * k
            lo.append(1.0)
            hi.append(1.0)
            r += 1
        for (a, b, tag), (m, rg, cg) in pairs.items():
            na, nb = m.shape
            base = poff[(a, b, tag)]
            for s in range(na):     # sum_t e[S, t] = x[a, S], S a set of rows alike
                xs = [off[a] + i for i in np.flatnonzero(rg == s)]
                rows += [r] * (nb + len(xs))
                cols += list(range(base + s * nb, base + s * nb + nb)) + xs
                vals += [1.0] * nb + [-1.0] * len(xs)
                r += 1
            for t in range(nb):     # sum_s e[s, T] = x[b, T]
                xs = [off[b] + i for i in np.flatnonzero(cg == t)]
                rows += [r] * (na + len(xs))
                cols += list(range(base + t, base + na * nb, nb)) + xs
                vals += [1.0] * na + [-1.0] * len(xs)
                r += 1
            lo += [0.0] * (na + nb)
            hi += [0.0] * (na + nb)
        for k, (base, us, ut) in roff.items():       # transportation, as above
            a, b = k[0], k[1]
            srcs, tgts = self.rawkeys[k]
            for i, sk in enumerate(us):
                xs = [off[a] + q for q, c in enumerate(keep[a]) if srcs[c] == sk]
                rows += [r] * (len(ut) + len(xs))
                cols += list(range(base + i * len(ut), base + (i + 1) * len(ut))) + xs
                vals += [1.0] * len(ut) + [-1.0] * len(xs)
                r += 1
            for j, tk in enumerate(ut):
                xs = [off[b] + q for q, c in enumerate(keep[b]) if tgts[c] == tk]
                rows += [r] * (len(us) + len(xs))
                cols += list(range(base + j, base + len(us) * len(ut), len(ut))) + xs
                vals += [1.0] * len(us) + [-1.0] * len(xs)
                r += 1
            lo += [0.0] * (len(us) + len(ut))
            hi += [0.0] * (len(us) + len(ut))
        for sh, (base, cells) in zip(self.shared.values(), yoff):
            # y[S, T] >= P(the value has dims S and one of its readers needs T), per kind
            # of reader
            a = sh.a
            for (b, tag), tt in sh.targets.items():
                k = (a, b, tag)
                for y, (sk, j) in enumerate(cells):
                    tk = sh.ts[j]
                    if k in roff:
                        rb, us, ut = roff[k]
                        if tk not in ut:
                            continue
                        cs = [rb + us.index(sk) * len(ut) + ut.index(tk)]
                    elif len(keep[a]) == 1:
                        cs = [off[b] + q for q, c in enumerate(keep[b]) if tt[c] == tk]
                    elif tt[keep[b][0]] == tk:     # the reader's one choice needs T
                        cs = [off[a] + q for q, c in enumerate(keep[a]) if sh.srcs[c] == sk]
                    else:
                        cs = []
                    if not cs:
                        continue
                    rows += [r] * (len(cs) + 1)
                    cols += [base + y] + cs
                    vals += [1.0] + [-1.0] * len(cs)
                    lo.append(0.0)
                    hi.append(np.inf)
                    r += 1
        for a, da, b, db in self.ties:
            da = [da[i] for i in keep[a]]
            db = [db[i] for i in keep[b]]
            for d in set(da) | set(db):
                coef = {}
                for s, x in enumerate(da):
                    if x == d:
                        coef[off[a] + s] = coef.get(off[a] + s, 0.0) + 1.0
                for t, x in enumerate(db):
                    if x == d:
                        coef[off[b] + t] = coef.get(off[b] + t, 0.0) - 1.0
                coef = {c: v for c, v in coef.items() if v}
                if coef:
                    rows += [r] * len(coef)
                    cols += coef.keys()
                    vals += coef.values()
                    lo.append(0.0)
                    hi.append(0.0)
                    r += 1
        if budget is not None:
            for extra, cap, gathered, joint in [(None, budget, {}, {})] + self.cuts:
                for c, mem in enumerate(self.mem):
                    mem = (mem if extra is None else mem + extra[c])[keep[c]]
                    rows += [r] * len(mem)
                    cols += range(off[c], off[c] + len(mem))
                    vals += list(mem)
                for (a, b, tag), m in joint.items():    # on the joint variables
                    m = m[keep[a]][:, keep[b]]
                    if (a, b, tag) in pairs:     # merged rows and columns: the least
                        m2, rg, cg = pairs[(a, b, tag)]
                        low = np.full(m2.shape, np.inf)
                        np.minimum.at(low, (rg[:, None], cg[None, :]), m)
                        rows += [r] * low.size
                        cols += range(poff[(a, b, tag)], poff[(a, b, tag)] + low.size)
                        vals += list(low.ravel())
                    elif len(keep[a]) == 1 or len(keep[b]) == 1:     # one side decided
                        c, vec = (b, m[0]) if len(keep[a]) == 1 else (a, m[:, 0])
                        rows += [r] * len(vec)
                        cols += range(off[c], off[c] + len(vec))
                        vals += list(vec)
                for (k, sh), (base, cells) in zip(self.shared.items(), yoff):
                    nb = gathered.get(k)
                    if nb is not None:
                        rows += [r] * len(cells)
                        cols += [base + y for y in range(len(cells))]
                        vals += [nb[j] for _, j in cells]
                lo.append(-np.inf)
                hi.append(float(cap))
                r += 1
        a = coo_matrix((vals, (rows, cols)), shape=(r, n)).tocsr()
        integ = np.zeros(n)
        integ[:nx] = 1
        return obj, integ, a, lo, hi, off, [len(c) for c in cost]

    def local_cost(self, c, chosen) -> np.ndarray:
        """Class c's cost per choice with every other class's choice kept."""
        out = self.cost[c].copy()
        for (a, b, _), m in list(self.full.items()) + list(self.raw.items()):
            if a == c:
                out += m[:, chosen[b]]
            elif b == c:
                out += m[chosen[a], :]
        return out


class _Shared:
    """A value class read by consumers of other classes: `a` its producer's class,
    `srcs` its dims (keys) per choice of a, `ts` the target dims its readers may
    need, `cost[s, j]` the reshard from choice s to ts[j], `targets[(b, tag)]` per
    kind of reader the target per choice, `count` the values alike, `edges` theirs."""
    __slots__ = ("a", "srcs", "ts", "cost", "targets", "count", "edges")

    def __init__(self, a, srcs, ts, cost, targets):
        self.a, self.srcs, self.ts, self.cost, self.targets = a, srcs, ts, cost, targets
        self.count, self.edges = 0, []


def _prune(cost, mem, full, ties, held, rounds=4) -> list:
    """Per class the choices to keep: a choice no cheaper, no smaller and no better
    placed towards any neighbour's remaining choices than another (with the same tied
    shardings) is dropped; the optimum is among the rest. Returns index arrays."""
    alive = [np.ones(len(c), bool) for c in cost]
    sig = [[() for _ in c] for c in cost]
    for a, da, b, db in ties:
        for c, d in ((a, da), (b, db)):
            sig[c] = [t + (x,) for t, x in zip(sig[c], d)]
    for _ in range(rounds):
        changed = False
        for c in range(len(cost)):
            idx = np.flatnonzero(alive[c])
            if len(idx) < 2:
                continue
            cols = [cost[c][idx, None], mem[c][idx, None], held[c][idx, None]]
            for (a, b, _), m in full.items():
                if a == c:
                    cols.append(m[idx][:, alive[b]])
                elif b == c:
                    cols.append(m[alive[a]][:, idx].T)
            prof = np.hstack(cols)
            le = (prof[None, :, :] <= prof[:, None, :] + 1e-15).all(-1)    # [s, s']: s' <= s
            eq = le & le.T
            lower = np.arange(len(idx))[None, :] < np.arange(len(idx))[:, None]
            same = np.array([[sig[c][i] == sig[c][j] for j in idx] for i in idx])
            dead = ((le & ~eq) | (eq & lower)) & same
            np.fill_diagonal(dead, False)
            drop = dead.any(1)
            if drop.any():
                alive[c][idx[drop]] = False
                changed = True
        if not changed:
            break
    return [np.flatnonzero(a) for a in alive]
