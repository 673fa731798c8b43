"""The golden linearizations (tests/golden/gen_linearizations.py) are current: linearize still
builds the same backward body, keeps the same residuals and peels the same carry patterns
for each named body. And a linearization of each is built whole, with typed residuals."""

import importlib.util
import os
from dataclasses import fields

from scanlib.scan.linearize import linearize
from scanlib.scan.residuals import Kind, Linearization


def _generator():
    path = os.path.join(os.path.dirname(__file__), "golden", "gen_linearizations.py")
    spec = importlib.util.spec_from_file_location("gen_linearizations", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def test_golden_linearizations_are_up_to_date(capsys):
    assert _generator().main(["--check"]) == 0, capsys.readouterr().err


def test_a_linearization_is_built_whole_with_typed_residuals():
    # Every attribute is a field its constructor sets, and each residual says where the
    # backward pass gets it: the per-step ones are the backward body's xs after the
    # cotangents and accumulators, in order, of their forward values' types.
    gen = _generator()
    for name in sorted(gen.CORPUS) + sorted(gen.EXTRA):
        f, init, xs = gen.CORPUS[name] if name in gen.CORPUS else gen.EXTRA[name]
        body, nc, consts, xs_t = gen.body_of(f, init, xs)
        lin = linearize(body, nc, *gen.needs(name, xs_t, consts))
        assert set(vars(lin)) == {fl.name for fl in fields(Linearization)}, name
        n_in = lin.num_bwd_carry + sum(lin.ct_ys)
        scanned = lin.bwd_body.invars[n_in:]
        assert len(scanned) == len(lin.per_step_residuals), name
        for r, v in zip(lin.per_step_residuals, scanned):
            assert isinstance(r.kind, Kind) and lin.bwd_sources[v] is r.var, (name, r)
            assert (v.shape, v.dtype) == (r.shape, r.dtype), (name, r)
        for r in lin.residuals:
            assert (r.index is None) == (r.kind is Kind.RECOMPUTED), (name, r)
